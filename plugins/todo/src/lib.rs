//! Example stateful plugin: a to-do list kept in mcpbox's durable key-value state.
//!
//! Items are stored one per key (`item:<id>`, zero-padded so keys sort by id) as JSON; ids
//! come from an atomic counter. Listing reads a page of keys at a time (at most 1,000, the
//! most one `get-many` takes), so any number of items lists. Every change announces
//! `todo://items` as updated, so subscribed clients re-read it.

use mcpbox_sdk::state::{StateError, Store};
use mcpbox_sdk::{
    Deserialize, Json, JsonSchema, Plugin, ResourceInfo, Resources, Serialize, Tool, Tools, host,
};

const ITEMS_URI: &str = "todo://items";

/// One to-do item.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Item {
    /// Its id.
    id: i64,
    /// What to do.
    text: String,
    /// Whether it is done.
    done: bool,
}

/// The items, for structured results.
#[derive(Serialize, JsonSchema)]
struct ItemList {
    items: Vec<Item>,
}

fn key(id: i64) -> String {
    format!("item:{id:012}")
}

/// Arguments of `add`.
#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// What to do.
    text: String,
}

fn add(AddArgs { text }: AddArgs) -> Result<Json<Item>, StateError> {
    let store = Store::open_default()?;
    let id = store.increment("next-id", 1)?;
    let item = Item {
        id,
        text,
        done: false,
    };
    store.set(&key(id), &item)?;
    host::notify_resource_updated(ITEMS_URI);
    Ok(Json(item))
}

/// Arguments of `list`.
#[derive(Deserialize, JsonSchema)]
struct ListArgs {
    /// Also list finished items.
    #[serde(default)]
    include_done: bool,
}

/// Every item, oldest first: a page of keys at a time, each page's items in one `get-many`.
fn items(store: &Store) -> Result<Vec<Item>, StateError> {
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let page = store.keys_page(cursor.as_deref())?;
        let keys: Vec<String> = page
            .keys
            .into_iter()
            .filter(|k| k.starts_with("item:"))
            .collect();
        if !keys.is_empty() {
            items.extend(store.get_many::<Item>(&keys)?.into_iter().flatten());
        }
        match page.cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(items),
        }
    }
}

fn list(ListArgs { include_done }: ListArgs) -> Result<Json<ItemList>, StateError> {
    let store = Store::open_default()?;
    let items = items(&store)?
        .into_iter()
        .filter(|item| include_done || !item.done)
        .collect();
    Ok(Json(ItemList { items }))
}

/// Arguments of `done` and `remove`.
#[derive(Deserialize, JsonSchema)]
struct IdArgs {
    /// The item's id.
    id: i64,
}

fn done(IdArgs { id }: IdArgs) -> Result<Json<Item>, String> {
    let store = Store::open_default().map_err(|e| e.to_string())?;
    let item = store
        .update(&key(id), |item: Option<Item>| {
            item.map(|item| Item { done: true, ..item })
        })
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("there is no item {id}"))?;
    host::notify_resource_updated(ITEMS_URI);
    Ok(Json(item))
}

fn remove(IdArgs { id }: IdArgs) -> Result<String, String> {
    let store = Store::open_default().map_err(|e| e.to_string())?;
    if !store.exists(&key(id)).map_err(|e| e.to_string())? {
        return Err(format!("there is no item {id}"));
    }
    store.delete(&key(id)).map_err(|e| e.to_string())?;
    host::notify_resource_updated(ITEMS_URI);
    Ok(format!("removed item {id}"))
}

fn all_items() -> Result<String, StateError> {
    let store = Store::open_default()?;
    let items = items(&store)?;
    serde_json::to_string_pretty(&items).map_err(|e| StateError::Json(e.to_string()))
}

struct Todo;

impl Plugin for Todo {
    fn tools(tools: &mut Tools) {
        tools
            .add(Tool::new("add", "Add an item to the to-do list"), add)
            .add(
                Tool::new("list", "The to-do list, oldest first").read_only(true),
                list,
            )
            .add(
                Tool::new("done", "Mark a to-do item as done").idempotent(true),
                done,
            )
            .add(
                Tool::new("remove", "Remove an item from the to-do list").destructive(true),
                remove,
            );
    }

    fn resources(resources: &mut Resources) {
        resources.add(
            ResourceInfo::new(ITEMS_URI, "todo-items")
                .title("To-do items")
                .description("Every to-do item, as JSON")
                .mime_type("application/json"),
            all_items,
        );
    }
}

mcpbox_sdk::export!(Todo);
