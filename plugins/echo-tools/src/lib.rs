//! Example tools plugin: `echo`, a typed calculator (`sum`, `divide`) and `show_content`, which
//! returns each kind of MCP content a tool can produce.

use mcpbox_sdk::{
    Content, Deserialize, Json, JsonSchema, Plugin, ResourceInfo, Serialize, Tool, Tools,
};

const PIXEL_PNG: &[u8] = include_bytes!("../assets/pixel.png");
const BEEP_WAV: &[u8] = include_bytes!("../assets/beep.wav");

/// Arguments of `echo`.
#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

/// Two numbers.
#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// The first addend.
    a: f64,
    /// The second addend.
    b: f64,
}

/// The result of `sum`.
#[derive(Serialize, JsonSchema)]
struct Sum {
    /// `a + b`.
    sum: f64,
}

/// A division.
#[derive(Clone, Copy, Deserialize, JsonSchema)]
struct DivideArgs {
    /// The number to divide.
    dividend: f64,
    /// The number to divide by; zero is an error.
    divisor: f64,
}

/// Which kind of content `show_content` returns.
#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ContentKind {
    /// A 1×1 PNG image.
    Image,
    /// A short WAV sound.
    Audio,
    /// A link to a resource.
    ResourceLink,
    /// An embedded text resource.
    EmbeddedText,
    /// An embedded binary resource.
    EmbeddedBlob,
}

/// Arguments of `show_content`.
#[derive(Clone, Copy, Deserialize, JsonSchema)]
struct ShowContentArgs {
    /// The kind of content to return.
    kind: ContentKind,
}

fn divide(args: DivideArgs) -> Result<String, String> {
    if args.divisor == 0.0 {
        return Err(format!("cannot divide {} by zero", args.dividend));
    }
    Ok((args.dividend / args.divisor).to_string())
}

fn show_content(args: ShowContentArgs) -> Content {
    match args.kind {
        ContentKind::Image => Content::image(PIXEL_PNG, "image/png"),
        ContentKind::Audio => Content::audio(BEEP_WAV, "audio/wav"),
        ContentKind::ResourceLink => {
            Content::link(ResourceInfo::new("quote://1", "quote-1").mime_type("text/plain"))
        }
        ContentKind::EmbeddedText => Content::embedded_text(
            "memo://greeting",
            Some("text/plain"),
            "Hello from a resource.",
        ),
        ContentKind::EmbeddedBlob => {
            Content::embedded_blob("memo://pixel", Some("image/png"), PIXEL_PNG)
        }
    }
}

struct EchoTools;

impl Plugin for EchoTools {
    fn tools(tools: &mut Tools) {
        tools
            .add(
                Tool::new("echo", "Send the text back unchanged").read_only(true),
                |args: EchoArgs| args.text,
            )
            .add(
                Tool::new("sum", "Add two numbers")
                    .title("Sum")
                    .read_only(true),
                |args: AddArgs| {
                    Json(Sum {
                        sum: args.a + args.b,
                    })
                },
            )
            .add(
                Tool::new("divide", "Divide one number by another").read_only(true),
                divide,
            )
            .add(
                Tool::new(
                    "show_content",
                    "Return one kind of content: image, audio, link or embedded resource",
                )
                .read_only(true),
                show_content,
            );
    }
}

mcpbox_sdk::export!(EchoTools);
