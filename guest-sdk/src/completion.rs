//! Argument completion: [`Completions`] routes a completion request to the function
//! registered for that prompt argument or template variable.

use crate::CompletionResult;
use crate::bindings::mcpbox::plugin::types::CompletionRef;

/// The most values the host sends to a client for one completion request.
const MAX_VALUES: usize = 100;

/// The completions of a plugin, passed to [`Plugin::completions`](crate::Plugin::completions).
pub struct Completions<'a> {
    reference: &'a CompletionRef,
    argument: &'a str,
    value: &'a str,
    result: Option<Vec<String>>,
}

impl<'a> Completions<'a> {
    pub(crate) fn new(reference: &'a CompletionRef, argument: &'a str, value: &'a str) -> Self {
        Self {
            reference,
            argument,
            value,
            result: None,
        }
    }

    pub(crate) fn into_result(self) -> CompletionResult {
        let mut values = self.result.unwrap_or_default();
        let total = values.len();
        values.truncate(MAX_VALUES);
        CompletionResult {
            has_more: total > values.len(),
            total: u32::try_from(total).ok(),
            values,
        }
    }

    /// Complete argument `argument` of prompt `prompt`: `complete` gets the text typed so far
    /// and returns candidates, best first.
    pub fn prompt_argument(
        &mut self,
        prompt: &str,
        argument: &str,
        complete: impl FnOnce(&str) -> Vec<String>,
    ) -> &mut Self {
        let matches = matches!(self.reference, CompletionRef::Prompt(name) if name == prompt);
        self.complete_if(matches, argument, complete)
    }

    /// Complete variable `variable` of the resource template `uri_template`.
    pub fn template_variable(
        &mut self,
        uri_template: &str,
        variable: &str,
        complete: impl FnOnce(&str) -> Vec<String>,
    ) -> &mut Self {
        let matches =
            matches!(self.reference, CompletionRef::ResourceTemplate(t) if t == uri_template);
        self.complete_if(matches, variable, complete)
    }

    fn complete_if(
        &mut self,
        matches: bool,
        argument: &str,
        complete: impl FnOnce(&str) -> Vec<String>,
    ) -> &mut Self {
        if matches && self.result.is_none() && self.argument == argument {
            self.result = Some(complete(self.value));
        }
        self
    }
}
