//! The glue between a [`p3::Plugin`](super::Plugin) and the 0.3 bindings: a tool call answers
//! at once with its stream and result future, and runs the tool on the plugin's executor.

use std::marker::PhantomData;

use super::Plugin;
use super::bindings::exports::mcpbox::plugin::{completion, prompts, resources, tools};
use super::bindings::{wit_future, wit_stream};
use super::tools::{Output, Tools};
use crate::bindings::mcpbox::plugin::types::CompletionRef;
use crate::{
    CompletionResult, Completions, Content, Error, Prompt, PromptMessage, Prompts,
    ResourceContents, ResourceInfo, ResourceTemplate, Resources, Tool, ToolResult,
};

/// Implements the exported 0.3 interfaces for `P`. Used by [`p3::export!`](super::export).
pub struct Adapter<P>(PhantomData<P>);

impl<P: Plugin> tools::Guest for Adapter<P> {
    fn list_tools() -> Vec<Tool> {
        let mut tools = Tools::listing();
        P::tools(&mut tools);
        tools.into_list()
    }

    async fn call_tool(
        name: String,
        arguments: String,
    ) -> (
        wit_bindgen::StreamReader<Content>,
        wit_bindgen::FutureReader<Result<ToolResult, Error>>,
    ) {
        let (writer, reader) = wit_stream::new::<Content>();
        let (result_writer, result) = wit_future::new::<Result<ToolResult, Error>>(|| {
            Err(Error::Internal(
                "the tool ended without a result".to_owned(),
            ))
        });
        wit_bindgen::spawn_local(async move {
            let mut tools = Tools::calling(&name, &arguments, Output::new(writer));
            P::tools(&mut tools);
            // The stream ends (its writer dropped) before the result is written, so the host
            // has every item by then.
            let outcome = tools.run().await;
            // The host dropped its end: the call is over, nobody reads the result.
            let _ = result_writer.write(outcome).await;
        });
        (reader, result)
    }
}

impl<P: Plugin> prompts::Guest for Adapter<P> {
    fn list_prompts() -> Vec<Prompt> {
        let mut prompts = Prompts::listing();
        P::prompts(&mut prompts);
        prompts.into_list()
    }

    async fn get_prompt(
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

    async fn read_resource(uri: String) -> Result<Vec<ResourceContents>, Error> {
        let mut resources = Resources::reading(&uri);
        P::resources(&mut resources);
        resources.into_result()
    }
}

impl<P: Plugin> completion::Guest for Adapter<P> {
    async fn complete(
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
