//! `wasi:config/store` for plugins (through `wasmtime-wasi-config`): exactly the keys the
//! plugin's policy names, each with its value for this call: a literal, a variable of
//! mcpbox's environment read at load, or a secret from the operator's secrets file (the
//! caller's own, if the file has one for them, else everyone's). A key whose value cannot be
//! had is absent (`get` answers none); `mcpbox check` and the plugin's load name the missing
//! ones. Values are never logged: only their keys and sources are.

use wasmtime_wasi_config::{WasiConfig, WasiConfigVariables};

use crate::policy::{ConfigKey, ConfigSource, Secrets};

/// The values one call sees.
pub struct ConfigCtx {
    vars: WasiConfigVariables,
}

impl ConfigCtx {
    /// The values of `keys` for a call by the caller whose principal key is `principal`.
    pub fn new(keys: &[ConfigKey], secrets: &Secrets, principal: Option<&str>) -> Self {
        let mut vars = WasiConfigVariables::new();
        for key in keys {
            let value = match &key.source {
                ConfigSource::Literal(text) => Some(text.as_str()),
                ConfigSource::Env { value, .. } => value.as_ref().map(|v| v.expose()),
                ConfigSource::Secret(name) => secrets.get(name, principal).map(|v| v.expose()),
            };
            if let Some(value) = value {
                vars.insert(&key.name, value);
            }
        }
        Self { vars }
    }

    /// The view the `wasi:config/store` host traits work on.
    pub fn view(&self) -> WasiConfig<'_> {
        WasiConfig::from(&self.vars)
    }
}

/// Link `wasi:config/store` for every plugin; `view` reaches the call's values.
pub fn add_to_linker<T: 'static>(
    linker: &mut wasmtime::component::Linker<T>,
    view: fn(&mut T) -> WasiConfig<'_>,
) -> wasmtime::Result<()> {
    wasmtime_wasi_config::add_to_linker(linker, view)
}
