//! Example plugin with an HTTP grant: current weather from the Open-Meteo API.
//!
//! The plugin can only reach the hosts its manifest (`weather.toml`) allows. The API's base
//! URL and key come from the operator through `wasi:config` (`[config] api-base` and
//! `api-key`, a secret, in the manifest); a granted `WEATHER_API` environment variable also
//! sets the base, and without either it is `https://api.open-meteo.com`. With a key, requests
//! carry it as Open-Meteo's commercial API expects (`apikey=`).

use mcpbox_sdk::{Deserialize, Json, JsonSchema, Plugin, Serialize, Tool, Tools};

const DEFAULT_API: &str = "https://api.open-meteo.com";

/// Where to look.
#[derive(Clone, Copy, Deserialize, JsonSchema)]
struct Place {
    /// Latitude in degrees, −90 to 90.
    latitude: f64,
    /// Longitude in degrees, −180 to 180.
    longitude: f64,
}

/// The weather now.
#[derive(Serialize, JsonSchema)]
struct Weather {
    /// Air temperature 2 m above ground, in °C.
    temperature_celsius: f64,
    /// Wind speed 10 m above ground, in km/h.
    wind_speed_kmh: f64,
}

#[derive(Deserialize)]
struct ApiResponse {
    current: Current,
}

#[derive(Deserialize)]
struct Current {
    temperature_2m: f64,
    wind_speed_10m: f64,
}

fn current_weather(place: Place) -> Result<Json<Weather>, String> {
    if !(-90.0..=90.0).contains(&place.latitude) || !(-180.0..=180.0).contains(&place.longitude) {
        return Err("latitude must be within ±90 and longitude within ±180".to_owned());
    }
    let api = match mcpbox_sdk::config::get("api-base").map_err(|e| e.to_string())? {
        Some(base) => base,
        None => std::env::var("WEATHER_API").unwrap_or_else(|_| DEFAULT_API.to_owned()),
    };
    let mut url = format!(
        "{}/v1/forecast?latitude={}&longitude={}&current=temperature_2m,wind_speed_10m",
        api.trim_end_matches('/'),
        place.latitude,
        place.longitude
    );
    if let Some(key) = mcpbox_sdk::config::get("api-key").map_err(|e| e.to_string())? {
        // The key goes to the API and nowhere else: not into results, logs or errors.
        url.push_str("&apikey=");
        url.extend(
            key.bytes()
                .filter(u8::is_ascii_alphanumeric)
                .map(char::from),
        );
    }
    let response = mcpbox_sdk::http::get(&url).map_err(|e| e.to_string())?;
    if response.status != 200 {
        return Err(format!(
            "the weather service answered {}: {}",
            response.status,
            response.text()
        ));
    }
    let body: ApiResponse = response.json().map_err(|e| e.to_string())?;
    Ok(Json(Weather {
        temperature_celsius: body.current.temperature_2m,
        wind_speed_kmh: body.current.wind_speed_10m,
    }))
}

struct WeatherPlugin;

impl Plugin for WeatherPlugin {
    fn tools(tools: &mut Tools) {
        tools.add(
            Tool::new(
                "current_weather",
                "The current temperature and wind at a place",
            )
            .read_only(true)
            .open_world(true),
            current_weather,
        );
    }
}

mcpbox_sdk::export!(WeatherPlugin);
