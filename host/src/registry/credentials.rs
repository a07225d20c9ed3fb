//! Whose credentials each registry gets: the environment's, else the Docker configuration's
//! (`docker login`, credential helpers), else none.

use oci_client::Reference;
use oci_client::secrets::RegistryAuth;

use super::Registry;

/// Environment variables with registry credentials (for every registry; else the Docker
/// configuration's, else anonymous).
pub const USERNAME_VARIABLE: &str = "MCPBOX_REGISTRY_USERNAME";
/// See [`USERNAME_VARIABLE`].
pub const PASSWORD_VARIABLE: &str = "MCPBOX_REGISTRY_PASSWORD";
/// A bearer token to send as it is.
pub const TOKEN_VARIABLE: &str = "MCPBOX_REGISTRY_TOKEN";

impl Registry {
    /// Credentials for `reference`'s registry: the environment's, else the Docker
    /// configuration's (`docker login`, credential helpers), else anonymous.
    pub(super) fn auth(reference: &Reference) -> RegistryAuth {
        let registry = reference.resolve_registry();
        if let Ok(token) = std::env::var(TOKEN_VARIABLE) {
            tracing::debug!(registry, "using the bearer token in {TOKEN_VARIABLE}");
            return RegistryAuth::Bearer(token);
        }
        if let (Ok(user), Ok(password)) = (
            std::env::var(USERNAME_VARIABLE),
            std::env::var(PASSWORD_VARIABLE),
        ) {
            tracing::debug!(
                registry,
                user,
                "using the credentials in {USERNAME_VARIABLE}"
            );
            return RegistryAuth::Basic(user, password);
        }
        match docker_credential::get_credential(registry) {
            Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
                tracing::debug!(
                    registry,
                    user,
                    "using the Docker configuration's credentials"
                );
                RegistryAuth::Basic(user, password)
            }
            Ok(docker_credential::DockerCredential::IdentityToken(_)) => {
                tracing::debug!(
                    registry,
                    "the Docker configuration holds an identity token, which mcpbox cannot use; pulling anonymously"
                );
                RegistryAuth::Anonymous
            }
            Err(_) => RegistryAuth::Anonymous,
        }
    }
}
