//! The glue between a [`Plugin`] and the generated bindings: one adapter type implements every
//! exported interface by running the plugin's registrations in the matching mode.

use std::marker::PhantomData;

use crate::bindings::exports::mcpbox::plugin::{completion, prompts, resources, tools};
use crate::bindings::mcpbox::plugin::types::CompletionRef;
use crate::{
    CompletionResult, Completions, Error, Plugin, Prompt, PromptMessage, Prompts, ResourceContents,
    ResourceInfo, ResourceTemplate, Resources, Tool, ToolResult, Tools,
};

/// Implements the exported interfaces for `P`. Used by [`export!`](crate::export).
pub struct Adapter<P>(PhantomData<P>);

impl<P: Plugin> tools::Guest for Adapter<P> {
    fn list_tools() -> Vec<Tool> {
        let mut tools = Tools::listing();
        P::tools(&mut tools);
        tools.into_list()
    }

    fn call_tool(name: String, arguments: String) -> Result<ToolResult, Error> {
        let mut tools = Tools::calling(&name, &arguments);
        P::tools(&mut tools);
        tools.into_result()
    }
}

impl<P: Plugin> prompts::Guest for Adapter<P> {
    fn list_prompts() -> Vec<Prompt> {
        let mut prompts = Prompts::listing();
        P::prompts(&mut prompts);
        prompts.into_list()
    }

    fn get_prompt(
        name: String,
        arguments: Vec<(String, String)>,
    ) -> Result<Vec<PromptMessage>, Error> {
        let mut prompts = Prompts::getting(&name, &arguments);
        P::prompts(&mut prompts);
        prompts.into_result()
    }
}

impl<P: Plugin> resources::Guest for Adapter<P> {
    fn list_resources() -> Vec<ResourceInfo> {
        let mut resources = Resources::listing();
        P::resources(&mut resources);
        resources.into_lists().0
    }

    fn list_templates() -> Vec<ResourceTemplate> {
        let mut resources = Resources::listing();
        P::resources(&mut resources);
        resources.into_lists().1
    }

    fn read_resource(uri: String) -> Result<Vec<ResourceContents>, Error> {
        let mut resources = Resources::reading(&uri);
        P::resources(&mut resources);
        resources.into_result()
    }
}

impl<P: Plugin> completion::Guest for Adapter<P> {
    fn complete(
        reference: CompletionRef,
        argument: String,
        value: String,
        _context: Vec<(String, String)>,
    ) -> Result<CompletionResult, Error> {
        let mut completions = Completions::new(&reference, &argument, &value);
        P::completions(&mut completions);
        Ok(completions.into_result())
    }
}
