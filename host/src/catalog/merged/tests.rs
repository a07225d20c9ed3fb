//! Who owns each name, and the host's namespace: the catalog's claim rules.
use super::*;

/// Issue #60: after a restart, a name nobody served went to the first plugin in full-path
/// order, so a plugin installed into the managed directory (`/srv/mcpbox/managed` sorts
/// before `/srv/mcpbox/plugins`) took a name an operator's plugin serves.
#[test]
fn names_nobody_served_go_to_the_operators_plugins_before_the_managed_ones() {
    let tool = |name: &str| Claim::Tool(name.to_owned());
    let installed = Path::new("/srv/mcpbox/managed/x.wasm");
    let operators = Path::new("/srv/mcpbox/plugins/weather.wasm");
    let other = Path::new("/srv/mcpbox/plugins/zz.wasm");
    let offered = [
        (installed, vec![tool("forecast"), tool("x_only")]),
        (operators, vec![tool("forecast"), tool("shared")]),
        (other, vec![tool("shared")]),
    ];
    let managed = Some(Path::new("/srv/mcpbox/managed"));
    let first = owners(&offered, &HashMap::new(), managed);
    assert_eq!(first[&tool("forecast")], 1, "the operator's plugin first");
    assert_eq!(first[&tool("x_only")], 0);
    assert_eq!(
        first[&tool("shared")],
        1,
        "among the operator's, file order"
    );
    // Without a managed directory, file-name order alone, as before.
    let plain = owners(&offered, &HashMap::new(), None);
    assert_eq!(plain[&tool("forecast")], 0);
    // A name served before stays with its plugin, wherever it lies.
    let previous = HashMap::from([(tool("forecast"), installed.to_path_buf())]);
    let kept = owners(&offered, &previous, managed);
    assert_eq!(kept[&tool("forecast")], 0);
}

#[test]
fn a_tool_name_in_the_hosts_namespace_is_reserved_for_every_plugin() {
    for name in [
        "mcpbox_x",
        "mcpbox_install_plugins",
        "MCPBOX_install_plugin",
        "Mcpbox_search",
        "mcpbox_linked_accounts",
        "mcpbox_list_plugins",
    ] {
        assert!(reserved(&Claim::Tool(name.to_owned())), "{name}");
    }
    for name in ["mcpbox", "mcpboxes", "my_mcpbox_x", "echo", "mcp_box_x"] {
        assert!(!reserved(&Claim::Tool(name.to_owned())), "{name}");
    }
    // Prompts are not the host's: only tools are.
    assert!(!reserved(&Claim::Prompt("mcpbox_x".to_owned())));

    let refusal = |name: &str| {
        Refusal {
            claim: Claim::Tool(name.to_owned()),
            plugin: "lookalike".into(),
            owner: HOST.into(),
        }
        .to_string()
    };
    assert_eq!(
        refusal("mcpbox_install_plugins"),
        "refused tool `mcpbox_install_plugins` of plugin `lookalike`: names beginning `mcpbox_` are mcpbox's own, reserved for its tools"
    );
    assert_eq!(
        refusal("mcpbox_install_plugin"),
        "refused tool `mcpbox_install_plugin` of plugin `lookalike`: the name is reserved for mcpbox's own tools"
    );
}
