//! Example plugin with an HTTP grant: current weather from the Open-Meteo API.
//!
//! The plugin can only reach the hosts its manifest (`weather.toml`) allows. The API's base
//! URL comes from the `WEATHER_API` environment variable when granted (the tests point it at
//! a server of their own), and defaults to `https://api.open-meteo.com`.

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
    let api = std::env::var("WEATHER_API").unwrap_or_else(|_| DEFAULT_API.to_owned());
    let url = format!(
        "{}/v1/forecast?latitude={}&longitude={}&current=temperature_2m,wind_speed_10m",
        api.trim_end_matches('/'),
        place.latitude,
        place.longitude
    );
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
