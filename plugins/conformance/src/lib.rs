//! The fixtures the official MCP conformance suite (`@modelcontextprotocol/conformance`)
//! checks: tools for every content kind, logging, progress, errors, sampling and elicitation;
//! static, binary and templated resources; prompts with arguments, embedded resources and
//! images; and argument completion. For 2026-07-28: the diagnostic tools of the stateless
//! scenarios, list-change triggers, the input-request (MRTR) fixtures, and the tools of the
//! tasks scenarios (which run as tasks is the manifest's `[tasks]` to say).
//!
//! The triggers change this plugin's lists for real: granted a directory at `/state` (the
//! conformance test's manifest does that), a trigger bumps a counter there that the listed
//! `test_dynamic_tool` / `test_dynamic_prompt` descriptions show, and asks the host to read
//! the lists again. Without the grant the lists never change.
//!
//! This is the WASI 0.2 build (`mcpbox:plugin@0.1.0`). `plugins/conformance-p3` is the same
//! fixture as a WASI 0.3 component; what they share (every listing, answer and request, the
//! resources, prompts and completions) is in `fixtures.rs`, and only the tools differ.

use std::time::Duration;

use mcpbox_sdk::serde_json::Value;
use mcpbox_sdk::{
    Completions, ListKind, NoArgs, Plugin, Prompts, Resources, ToolResult, Tools, host,
};

mod fixtures;

use fixtures::{
    DeleteArgs, ElicitationArgs, GreetArgs, SamplingArgs, SlowArgs, ask, tool as plain,
};

/// Bump `kind`'s generation and tell the host the list changed.
fn trigger(kind: &str, list: ListKind) -> Result<String, String> {
    let said = fixtures::bump(kind)?;
    host::notify_list_changed(list);
    Ok(said)
}

fn sample_keyed(key: &str, prompt: &str) -> Result<String, String> {
    Ok(fixtures::sampled(&host::sample(
        &fixtures::sample_request(Some(key), prompt),
    )?))
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

fn with_logging(_: NoArgs) -> String {
    for (i, line) in fixtures::LOG_LINES.iter().enumerate() {
        if i > 0 {
            sleep_ms(fixtures::STEP_MS);
        }
        host::info(line);
    }
    fixtures::LOGGED.to_owned()
}

fn with_progress(_: NoArgs) -> String {
    for (step, progress) in fixtures::PROGRESS.into_iter().enumerate() {
        if step > 0 {
            sleep_ms(fixtures::STEP_MS);
        }
        host::progress(
            progress,
            Some(100.0),
            Some(&fixtures::progress_message(step)),
        );
    }
    fixtures::PROGRESSED.to_owned()
}

fn sampling(SamplingArgs { prompt }: SamplingArgs) -> Result<String, String> {
    let answer = host::sample(&fixtures::sample_request(None, &prompt))?;
    Ok(format!("LLM response: {}", fixtures::sampled(&answer)))
}

fn elicit(request: &Value, prefix: &str) -> Result<String, String> {
    Ok(fixtures::elicited(&host::elicit(request)?, prefix))
}

/// Ask the user to confirm (a boolean `confirm`), keyed `key`.
fn confirm(key: &str, message: &str) -> Result<(), String> {
    fixtures::confirmed(
        &host::elicit(&fixtures::confirm_request(key, message))?,
        key,
    )
}

/// Compute for `seconds`, in slices, so a cancelled call stops within one; progress each
/// second (a task's status message).
#[expect(
    clippy::needless_pass_by_value,
    reason = "the SDK hands a tool its arguments by value"
)]
fn slow_compute(args: SlowArgs) -> String {
    let ms = args.ms();
    let mut done = 0;
    while done < ms && !host::cancelled() {
        let step = (ms - done).min(100);
        sleep_ms(step);
        done += step;
        if done % 1000 == 0 {
            host::progress(
                done as f64,
                Some(ms as f64),
                Some(&fixtures::computed(done, ms)),
            );
        }
    }
    args.answer()
}

/// The tools of the tasks scenarios (SEP-2663).
fn task_tools(tools: &mut Tools) {
    tools
        .add(plain("greet"), |GreetArgs { name }: GreetArgs| {
            format!("Hello, {name}!")
        })
        .add(plain("slow_compute"), slow_compute)
        .add(
            plain("failing_job"),
            |_: NoArgs| -> Result<String, String> {
                sleep_ms(fixtures::TASK_WORK_MS);
                Err("the job failed: the input could not be processed".to_owned())
            },
        )
        .add(plain("protocol_error_job"), |_: NoArgs| -> String {
            sleep_ms(fixtures::TASK_WORK_MS);
            panic!("protocol_error_job crashed on purpose")
        })
        .add(
            plain("confirm_delete"),
            |DeleteArgs { filename }: DeleteArgs| -> Result<String, String> {
                sleep_ms(fixtures::TASK_WORK_MS);
                confirm("confirm", &format!("Delete {filename}?"))?;
                Ok(format!("Deleted {filename}"))
            },
        )
        .add(
            plain("multi_input"),
            |_: NoArgs| -> Result<String, String> {
                sleep_ms(fixtures::TASK_WORK_MS);
                // Both are asked before either answer is used, so they go in one round.
                let first = confirm("first", "First confirmation?");
                let second = confirm("second", "Second confirmation?");
                first?;
                second?;
                Ok("both confirmed".to_owned())
            },
        )
        .add(
            plain("test_tool_with_task"),
            |_: NoArgs| -> Result<String, String> {
                let name = ask("user_name", "What is your name?", "name")?;
                sleep_ms(fixtures::TASK_WORK_MS);
                Ok(format!("Hello, {name}! The task is done."))
            },
        );
}

/// The diagnostic and input-request tools of the 2026-07-28 scenarios.
fn mrtr_tools(tools: &mut Tools) {
    tools
        .add(
            plain("test_missing_capability"),
            |_: NoArgs| -> Result<String, String> {
                sample_keyed("probe", "Say anything")?;
                Ok("Success".to_owned())
            },
        )
        .add(plain("test_streaming_elicitation"), |_: NoArgs| {
            ask("stream_answer", "Anything to add?", "answer")
        })
        .add(plain("test_logging_tool"), |_: NoArgs| {
            host::info("test_logging_tool ran");
            "Logged".to_owned()
        })
        .add(plain("test_trigger_tool_change"), |_: NoArgs| {
            trigger("tools", ListKind::Tools)
        })
        .add(plain("test_trigger_prompt_change"), |_: NoArgs| {
            trigger("prompts", ListKind::Prompts)
        })
        .add(plain("test_dynamic_tool"), |_: NoArgs| "dynamic")
        .add(
            plain("test_input_required_result_elicitation"),
            |_: NoArgs| -> Result<String, String> {
                let name = ask("user_name", "What is your name?", "name")?;
                Ok(format!("Hello, {name}!"))
            },
        )
        .add(plain("test_input_required_result_sampling"), |_: NoArgs| {
            sample_keyed("capital_question", "What is the capital of France?")
        })
        .add(
            plain("test_input_required_result_list_roots"),
            |_: NoArgs| -> Result<String, String> {
                let roots = host::list_roots()?;
                Ok(format!("Roots: {}", roots["roots"]))
            },
        )
        .add(
            plain("test_input_required_result_request_state"),
            |_: NoArgs| -> Result<String, String> {
                ask("confirm", "Confirm?", "ok")?;
                Ok("state-ok".to_owned())
            },
        )
        .add(
            plain("test_input_required_result_multiple_inputs"),
            |_: NoArgs| -> Result<String, String> {
                // All three are asked before any answer is used, so they go in one round.
                let name = ask("user_name", "What is your name?", "name");
                let greeting = sample_keyed("greeting", "Write a greeting");
                let roots = host::list_roots();
                Ok(format!(
                    "name={}, greeting={}, roots={}",
                    name?, greeting?, roots?["roots"]
                ))
            },
        )
        .add(
            plain("test_input_required_result_multi_round"),
            |_: NoArgs| -> Result<String, String> {
                let name = ask("name", "What is your name?", "name")?;
                let color = ask("color", &format!("{name}, your favourite colour?"), "color")?;
                Ok(format!("{name} likes {color}"))
            },
        )
        .add(
            plain("test_input_required_result_tampered_state"),
            |_: NoArgs| -> Result<String, String> {
                ask("confirm", "Confirm?", "ok")?;
                Ok("confirmed".to_owned())
            },
        )
        .add(
            plain("test_input_required_result_capabilities"),
            |_: NoArgs| -> Result<String, String> {
                match ask("user_choice", "Pick one", "choice") {
                    Ok(choice) => Ok(format!("user chose {choice}")),
                    Err(_) => {
                        sample_keyed("model_choice", "Pick one").map(|c| format!("model chose {c}"))
                    }
                }
            },
        );
}

struct Conformance;

impl Plugin for Conformance {
    fn tools(tools: &mut Tools) {
        tools
            .add(plain("test_simple_text"), |_: NoArgs| fixtures::SIMPLE_TEXT)
            .add(plain("test_image_content"), |_: NoArgs| fixtures::image())
            .add(plain("test_audio_content"), |_: NoArgs| fixtures::audio())
            .add(plain("test_embedded_resource"), |_: NoArgs| {
                fixtures::embedded()
            })
            .add(plain("test_multiple_content_types"), |_: NoArgs| {
                fixtures::mixed()
            })
            .add(plain("test_tool_with_logging"), with_logging)
            .add(plain("test_tool_with_progress"), with_progress)
            .add(plain("test_error_handling"), |_: NoArgs| {
                ToolResult::error(fixtures::ERROR_TEXT)
            })
            .add(plain("test_sampling"), sampling)
            .add(
                plain("test_elicitation"),
                |ElicitationArgs { message }: ElicitationArgs| {
                    elicit(&fixtures::elicitation_request(&message), "User response")
                },
            )
            .add(plain("test_elicitation_sep1034_defaults"), |_: NoArgs| {
                elicit(&fixtures::defaults_request(), "Elicitation completed")
            })
            .add(plain("test_elicitation_sep1330_enums"), |_: NoArgs| {
                elicit(&fixtures::enums_request(), "Elicitation completed")
            })
            .add(plain("json_schema_2020_12_tool"), |args: Value| {
                format!("JSON Schema 2020-12 tool called with: {args}")
            });
        mrtr_tools(tools);
        task_tools(tools);
        // Last, so the header-validation scenario's first tool stays what it was.
        tools.add(plain("test_custom_headers"), |args: Value| {
            format!("Custom headers test completed: {args}")
        });
    }

    fn resources(resources: &mut Resources) {
        fixtures::resources(resources);
    }

    fn prompts(prompts: &mut Prompts) {
        fixtures::prompts(prompts);
    }

    fn completions(completions: &mut Completions) {
        fixtures::completions(completions);
    }
}

mcpbox_sdk::export!(Conformance);

// The skills under `skills/` go into the component (the suite's skills scenarios).
mcpbox_sdk::skills!("skills");
