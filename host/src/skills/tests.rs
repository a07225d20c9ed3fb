//! Tests of skills: finding sections, serving a skill's files and directories, refusing broken
//! skills and front matter, and the bounds on what skills hold.

use super::section::leb128;
use super::*;

fn tree(files: &[(&str, &str)]) -> Skills {
    let mut out = Skills::default();
    out.build(
        "demo",
        &files
            .iter()
            .map(|(p, t)| ((*p).to_owned(), t.as_bytes().to_vec()))
            .collect(),
    );
    out
}

/// Directories are found by name whatever their paths sort as (`a-c/…` sorts before
/// `a/…`, `a` before `a-c`), and a file of two skills, one inside the other, is listed once.
#[test]
fn directories_are_found_whatever_their_paths_sort_as() {
    let manifest = |name: &str| format!("---\nname: {name}\ndescription: d\n---\n");
    let skills = tree(&[
        ("a/SKILL.md", &manifest("a")),
        ("a/x/y.md", "y"),
        ("a-c/SKILL.md", &manifest("a-c")),
        ("a-c/z/w.md", "w"),
        ("a/b/SKILL.md", &manifest("b")),
    ]);
    assert!(skills.refused.is_empty(), "{:?}", skills.refused);
    let names = |uri: &str| -> Vec<String> {
        skills
            .directory(uri)
            .unwrap_or_else(|| panic!("{uri}"))
            .children(uri)
            .map(|(r, _)| {
                let r: Value = serde_json::from_str(r.get()).unwrap();
                r["uri"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    assert_eq!(
        names("skill://demo"),
        ["skill://demo/a", "skill://demo/a-c"]
    );
    assert_eq!(
        names("skill://demo/a"),
        [
            "skill://demo/a/SKILL.md",
            "skill://demo/a/b",
            "skill://demo/a/x"
        ]
    );
    assert_eq!(names("skill://demo/a/b"), ["skill://demo/a/b/SKILL.md"]);
    assert_eq!(names("skill://demo/a-c/z"), ["skill://demo/a-c/z/w.md"]);
    assert_eq!(names("skill://demo/a/x"), ["skill://demo/a/x/y.md"]);
}

const REVIEW: &str =
    "---\nname: review\ndescription: Review a change\nmetadata:\n  version: \"2\"\n---\n# Review\n";

#[test]
fn a_skill_gets_its_entry_files_and_directories() {
    let skills = tree(&[
        ("review/SKILL.md", REVIEW),
        ("review/references/CHECKLIST.md", "- tests\n"),
    ]);
    assert!(skills.refused.is_empty(), "{:?}", skills.refused);
    let skill = &skills.skills[0];
    assert_eq!(skill.uri, "skill://demo/review/SKILL.md");
    let entry: Value = serde_json::from_str(skill.entry.get()).unwrap();
    assert_eq!(entry["frontmatter"]["name"], "review");
    assert_eq!(entry["frontmatter"]["metadata"]["version"], "2");
    let resources = entry["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 2);
    assert_eq!(resources[0]["uri"], "skill://demo/review/SKILL.md");
    assert_eq!(resources[0]["size"], REVIEW.len());
    assert_eq!(
        resources[0]["digest"],
        format!("sha256:{}", hex::encode(Sha256::digest(REVIEW.as_bytes())))
    );
    for uri in [
        "skill://demo",
        "skill://demo/review",
        "skill://demo/review/references",
    ] {
        assert!(skills.directory(uri).is_some(), "{uri}");
    }
    for uri in [
        "skill://demo/",
        "skill://demo/review/",
        "skill://demo/review/SKILL.md",
        "skill://demo/other",
        "skill://demox",
        "skill://other/review",
    ] {
        assert!(skills.directory(uri).is_none(), "{uri}");
    }
    let top: Vec<Value> = skills
        .directory("skill://demo")
        .unwrap()
        .children("skill://demo")
        .map(|(r, file)| {
            assert_eq!(file, None);
            serde_json::from_str(r.get()).unwrap()
        })
        .collect();
    assert_eq!(
        top,
        [json!({"uri": "skill://demo/review", "name": "review", "mimeType": DIRECTORY_MIME})]
    );
    let uri = "skill://demo/review";
    let children: Vec<(Value, Option<&str>)> = skills
        .directory(uri)
        .unwrap()
        .children(uri)
        .map(|(r, file)| (serde_json::from_str(r.get()).unwrap(), file))
        .collect();
    assert_eq!(children[0].1, Some("skill://demo/review/SKILL.md"));
    let children: Vec<Value> = children.into_iter().map(|(r, _)| r).collect();
    assert_eq!(children[1]["mimeType"], DIRECTORY_MIME);
}

#[test]
fn broken_skills_are_refused_with_the_reason_and_the_rest_served() {
    let skills = tree(&[
        ("good/SKILL.md", "---\nname: good\ndescription: Fine\n---\n"),
        (
            "bad/SKILL.md",
            "---\nname: other\ndescription: Wrong\n---\n",
        ),
        (
            "Caps/SKILL.md",
            "---\nname: Caps\ndescription: Upper\n---\n",
        ),
        ("plain/SKILL.md", "no front matter"),
        ("nodesc/SKILL.md", "---\nname: nodesc\n---\n"),
        ("stray.md", "outside"),
    ]);
    assert_eq!(skills.skills.len(), 1);
    let why = |what: &str| {
        skills
            .refused
            .iter()
            .find(|(w, _)| w.contains(what))
            .map(|(_, why)| why.clone())
            .unwrap_or_default()
    };
    assert!(why("bad").contains("must be equal"), "{:?}", skills.refused);
    assert!(why("Caps").contains("not a skill name"));
    assert!(why("plain").contains("front matter"));
    assert!(why("nodesc").contains("`description`"));
    assert!(why("stray.md").contains("not inside"));
}

/// Sections are found in nested modules too, after a code section stepped over whole, and
/// at the top level; other custom sections are not taken.
#[test]
fn sections_are_found_past_code_and_inside_nested_modules() {
    fn section(id: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![id, u8::try_from(content.len()).unwrap()];
        out.extend_from_slice(content);
        out
    }
    fn custom(name: &str, payload: &[u8]) -> Vec<u8> {
        let mut content = vec![u8::try_from(name.len()).unwrap()];
        content.extend_from_slice(name.as_bytes());
        content.extend_from_slice(payload);
        section(0, &content)
    }
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    module.extend(section(1, &[1, 0x60, 0, 0])); // one type: () -> ()
    module.extend(section(3, &[1, 0])); // one function of it
    module.extend(section(10, &[1, 2, 0, 0x0b])); // its body: no locals, `end`
    module.extend(custom(SECTION, b"inner"));
    module.extend(custom("name", b"other"));
    let mut component = b"\0asm\x0d\0\x01\0".to_vec();
    component.extend(section(1, &module)); // a core module
    component.extend(custom(SECTION, b"outer"));
    assert_eq!(
        sections(&component),
        [b"inner".as_slice(), b"outer".as_slice()]
    );
    // Cut short inside the code section: what was read before it is all there is.
    assert!(sections(&component[..module.len() - 20]).is_empty());
}

#[test]
fn sections_round_trip_and_bad_ones_are_refused() {
    let packed = encode(&[
        ("a/SKILL.md".to_owned(), b"text".to_vec()),
        ("a/x.bin".to_owned(), vec![0xff, 0x00]),
    ]);
    let files = unpack(&packed).unwrap();
    assert_eq!(files["a/x.bin"], vec![0xff, 0x00]);
    let twice = r#"{"version":1,"files":[{"path":"x","text":""},{"path":"x","text":""}]}"#;
    assert!(
        unpack(twice.as_bytes())
            .unwrap_err()
            .contains("packed twice")
    );
    for (doc, expected) in [
        (r#"{"version":2,"files":[]}"#, "format version"),
        (
            r#"{"version":1,"files":[{"path":"../x","text":""}]}"#,
            "`..`",
        ),
        (
            r#"{"version":1,"files":[{"path":"/x","text":""}]}"#,
            "empty",
        ),
        (
            r#"{"version":1,"files":[{"path":"a b","text":""}]}"#,
            "ASCII",
        ),
        (r#"{"version":1,"files":[{"path":"x"}]}"#, "exactly one"),
        ("not json", "not a skills document"),
    ] {
        let why = unpack(doc.as_bytes()).unwrap_err();
        assert!(why.contains(expected), "{doc}: {why}");
    }
}

#[test]
fn front_matter_is_bounded_in_size_and_depth() {
    let deep = format!(
        "---\nname: deep\ndescription: d\nx: {}1{}\n---\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    let big = format!(
        "---\nname: big\ndescription: {}\n---\n",
        "a".repeat(MAX_FRONTMATTER_BYTES)
    );
    let skills = tree(&[("deep/SKILL.md", &deep), ("big/SKILL.md", &big)]);
    assert!(skills.skills.is_empty());
    let reasons: Vec<&str> = skills.refused.iter().map(|(_, why)| why.as_str()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("deeper") || r.contains("recursion")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("at most 65536")),
        "{reasons:?}"
    );
}

/// Issue #55: a few hundred bytes of front matter, each level nine aliases of the one
/// before, became megabytes of entry and hundreds of MiB of memory: the parser expanded
/// every alias while loading, so the refusal of aliases never saw one.
#[test]
fn issue_55_an_alias_bomb_is_refused_before_anything_is_expanded() {
    let mut yaml =
        String::from("---\nname: bomb\ndescription: d\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n");
    for level in 1..=5 {
        let aliases = vec![format!("*l{}", level - 1); 9].join(", ");
        yaml.push_str(&format!("l{level}: &l{level} [{aliases}]\n"));
    }
    yaml.push_str("---\n");
    assert!(yaml.len() < 400, "{}", yaml.len());
    let why = frontmatter(&yaml).map(|m| m.len()).unwrap_err();
    assert_eq!(
        why,
        "its SKILL.md's front matter uses a YAML anchor (`&`) on the SKILL.md's line 4; anchors and aliases are refused"
    );
    // An anchor alone is refused too, and so is an alias of no anchor.
    let why = frontmatter("---\nname: a\ndescription: &d text\n---\n").unwrap_err();
    assert!(
        why.contains("uses a YAML anchor (`&`) on the SKILL.md's line 3"),
        "{why}"
    );
    let why = frontmatter("---\nname: a\ndescription: d\nx: *d\n---\n").unwrap_err();
    assert!(
        why.contains("alias") || why.contains("is not YAML"),
        "{why}"
    );
}

#[test]
fn issue_55_front_matter_is_bounded_in_values() {
    let items = vec!["1"; MAX_FRONTMATTER_NODES].join(",");
    let yaml = format!("---\nname: a\ndescription: d\nx: [{items}]\n---\n");
    let why = frontmatter(&yaml).map(|m| m.len()).unwrap_err();
    assert_eq!(
        why,
        format!("its SKILL.md's front matter has more than {MAX_FRONTMATTER_NODES} values")
    );
    // The mapping, its six keys and scalars, and the sequence: at the limit.
    let items = vec!["1"; MAX_FRONTMATTER_NODES - 7].join(",");
    let yaml = format!("---\nname: a\ndescription: d\nx: [{items}]\n---\n");
    assert!(frontmatter(&yaml).is_ok());
}

/// A component holding one section with `payload`.
fn component_with(payload: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    leb128(&mut body, SECTION.len());
    body.extend_from_slice(SECTION.as_bytes());
    body.extend_from_slice(payload);
    let mut out = b"\0asm\x0d\0\x01\0".to_vec();
    out.push(0);
    leb128(&mut out, body.len());
    out.extend_from_slice(&body);
    out
}

/// Issue #55: a section refused for one bad path served the files before it.
#[test]
fn issue_55_a_refused_section_serves_nothing() {
    let payload = encode(&[
        (
            "dots/SKILL.md".to_owned(),
            b"---\nname: dots\ndescription: d\n---\n".to_vec(),
        ),
        ("dots/../escape.md".to_owned(), b"x".to_vec()),
    ]);
    let skills = Skills::from_component("demo", &component_with(&payload));
    assert_eq!(skills.skills.len(), 0, "{:?}", skills.skills);
    assert_eq!(
        skills.refused,
        [(
            format!("section `{SECTION}`"),
            "file path `dots/../escape.md`: has a `.` or `..` segment".to_owned()
        )]
    );
    assert!(skills.directory("skill://demo/dots").is_none());
}

/// Issue #55: 128 files each some 505 directories deep (a 131 KiB section) held an entry,
/// a URI and a resource for every directory prefix: +202 MiB.
#[test]
fn issue_55_the_deep_tree_is_refused_with_the_reason() {
    let mut files = vec![(
        "deep/SKILL.md".to_owned(),
        b"---\nname: deep\ndescription: d\n---\n".to_vec(),
    )];
    for i in 0..127 {
        files.push((format!("deep/b{i:03}/{}f", "a/".repeat(503)), Vec::new()));
    }
    let payload = encode(&files);
    assert!(payload.len() > 128 << 10, "{}", payload.len());
    let skills = Skills::from_component("demo", &component_with(&payload));
    assert!(skills.skills.is_empty());
    assert_eq!(skills.refused.len(), 1, "{:?}", skills.refused);
    assert!(
        skills.refused[0].1.ends_with(&format!(
            "has 506 segments; a path may have at most {MAX_PATH_SEGMENTS}"
        )),
        "{:?}",
        skills.refused
    );
}

/// Issue #55: what a plugin's skills hold is a small multiple of their sections' bytes,
/// for the worst trees the bounds allow (each shape served whole, under a 64-byte name).
#[test]
fn issue_55_what_skills_hold_is_a_small_multiple_of_their_size() {
    let manifest = |name: &str| {
        (
            format!("{name}/SKILL.md"),
            format!("---\nname: {name}\ndescription: d\n---\n").into_bytes(),
        )
    };
    let short = |i: usize| format!("{i:x}");
    // Many skills, each only its SKILL.md.
    let skills: Vec<_> = (0..2000)
        .map(|i| manifest(&format!("s{}", short(i))))
        .collect();
    // Skills full of empty files with one-byte names.
    let mut empty = Vec::new();
    for s in 0..8 {
        let name = format!("s{s}");
        empty.push(manifest(&name));
        empty.extend((1..MAX_FILES).map(|i| (format!("{name}/{}", short(i)), Vec::new())));
    }
    // The deepest trees of one-byte segments, each file in directories of its own.
    let mut deep = Vec::new();
    for s in 0..4 {
        let name = format!("s{s}");
        deep.push(manifest(&name));
        let below = "a/".repeat(MAX_PATH_SEGMENTS - 3);
        deep.extend((1..MAX_FILES).map(|i| (format!("{name}/{}/{below}f", short(i)), Vec::new())));
    }
    // The longest paths.
    let mut long = vec![manifest("long")];
    let segment = "x".repeat(MAX_PATH_BYTES / MAX_PATH_SEGMENTS - 1);
    for i in 1..200 {
        let mut path = format!("long/{i:03}");
        while path.len() + segment.len() < MAX_PATH_BYTES
            && path.split('/').count() < MAX_PATH_SEGMENTS
        {
            path.push('/');
            path.push_str(&segment);
        }
        long.push((path, b"x".to_vec()));
    }
    // The fullest front matter.
    let values = vec!["x"; MAX_FRONTMATTER_NODES - 10].join(", ");
    let full = vec![(
        "full/SKILL.md".to_owned(),
        format!("---\nname: full\ndescription: d\nx: [{values}]\n---\n").into_bytes(),
    )];
    let plugin = "p".repeat(64);
    for (shape, files) in [
        ("skills", skills),
        ("empty", empty),
        ("deep", deep),
        ("long", long),
        ("full", full),
    ] {
        let section = encode(&files);
        let held = Skills::from_component(&plugin, &component_with(&section));
        assert!(held.refused.is_empty(), "{shape}: {:?}", held.refused);
        assert!(!held.skills.is_empty(), "{shape}");
        let (held, bytes) = (held.held_bytes(), section.len());
        assert!(
            held <= HELD_BYTES_PER_SECTION_BYTE * bytes,
            "{shape}: {held} bytes held for {bytes} ({}x)",
            held / bytes
        );
    }
}

#[test]
fn limits_hold() {
    let mut files: Vec<(String, String)> = vec![(
        "big/SKILL.md".into(),
        "---\nname: big\ndescription: d\n---\n".into(),
    )];
    for i in 0..MAX_FILES {
        files.push((format!("big/f{i}"), String::new()));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let skills = tree(&refs);
    assert!(skills.skills.is_empty());
    assert!(skills.refused[0].1.contains("at most 512"));
}

#[test]
fn names_follow_the_agent_skills_rules() {
    for good in ["a", "pdf-processing", "x1", &"a".repeat(64)] {
        assert!(valid_name(good), "{good}");
    }
    for bad in ["", "-a", "a-", "a--b", "A", "a_b", &"a".repeat(65)] {
        assert!(!valid_name(bad), "{bad}");
    }
}
