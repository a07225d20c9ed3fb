//! The conformance suite's fixture (`plugins/conformance`) built as a WASI 0.3 component
//! (`mcpbox:plugin@0.3.0`, the SDK's `p3` feature), so that the official suite checks a 0.3
//! plugin as it checks a 0.2 one (`services::conformance`).
//!
//! Everything but the tools is the 0.2 fixture's own code (`../conformance/src/fixtures.rs`):
//! every listing, answer and request, the resources, prompts and completions. The tools are
//! `async fn`s that await the client through the 0.3 `host` (several at once where the 0.2
//! fixture asks one after the other, in one round), and learn of cancellation from the
//! component model instead of polling `cancelled()`.

use std::time::Duration;

use mcpbox_sdk::p3::{Output, Plugin, Tools, host};
use mcpbox_sdk::serde_json::Value;
use mcpbox_sdk::{Completions, ListKind, NoArgs, Prompts, Resources, ToolResult};

#[path = "../../conformance/src/fixtures.rs"]
mod fixtures;

use fixtures::{DeleteArgs, ElicitationArgs, GreetArgs, SamplingArgs, SlowArgs, tool as plain};

/// Wait `ms`. The 0.3 world has no timer of its own in the SDK: std's sleep blocks this
/// instance (every task in it), which no fixture minds.
fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// Ask the user for `field`, keyed `key`.
async fn ask(key: &str, message: &str, field: &str) -> Result<String, String> {
    let answer = host::elicit(&fixtures::ask_request(key, message, field)).await?;
    fixtures::asked(&answer, field)
}

async fn sample_keyed(key: &str, prompt: &str) -> Result<String, String> {
    let answer = host::sample(&fixtures::sample_request(Some(key), prompt)).await?;
    Ok(fixtures::sampled(&answer))
}

/// Ask the user to confirm (a boolean `confirm`), keyed `key`.
async fn confirm(key: &str, message: &str) -> Result<(), String> {
    let answer = host::elicit(&fixtures::confirm_request(key, message)).await?;
    fixtures::confirmed(&answer, key)
}

async fn elicit(request: Value, prefix: &str) -> Result<String, String> {
    Ok(fixtures::elicited(&host::elicit(&request).await?, prefix))
}

/// Bump `kind`'s generation and tell the host the list changed.
fn trigger(kind: &str, list: ListKind) -> Result<String, String> {
    let said = fixtures::bump(kind)?;
    host::notify_list_changed(list);
    Ok(said)
}

async fn with_logging(_: NoArgs, _: Output) -> &'static str {
    for (i, line) in fixtures::LOG_LINES.iter().enumerate() {
        if i > 0 {
            sleep_ms(fixtures::STEP_MS);
        }
        host::info(line);
    }
    fixtures::LOGGED
}

async fn with_progress(_: NoArgs, _: Output) -> &'static str {
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
    fixtures::PROGRESSED
}

async fn sampling(SamplingArgs { prompt }: SamplingArgs, _: Output) -> Result<String, String> {
    let answer = host::sample(&fixtures::sample_request(None, &prompt)).await?;
    Ok(format!("LLM response: {}", fixtures::sampled(&answer)))
}

/// Compute for `seconds`, in slices; progress each second (a task's status message). A
/// cancelled call is stopped by the host between slices.
async fn slow_compute(args: SlowArgs, _: Output) -> String {
    let ms = args.ms();
    let mut done = 0;
    while done < ms {
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

async fn protocol_error_job(_: NoArgs, _: Output) -> String {
    sleep_ms(fixtures::TASK_WORK_MS);
    panic!("protocol_error_job crashed on purpose")
}

/// The tools of the tasks scenarios (SEP-2663).
fn task_tools(tools: &mut Tools) {
    tools
        .add(
            plain("greet"),
            |GreetArgs { name }: GreetArgs, _: Output| async move { format!("Hello, {name}!") },
        )
        .add(plain("slow_compute"), slow_compute)
        .add(plain("failing_job"), |_: NoArgs, _: Output| async {
            sleep_ms(fixtures::TASK_WORK_MS);
            Err::<String, _>("the job failed: the input could not be processed")
        })
        .add(plain("protocol_error_job"), protocol_error_job)
        .add(
            plain("confirm_delete"),
            |DeleteArgs { filename }: DeleteArgs, _: Output| async move {
                sleep_ms(fixtures::TASK_WORK_MS);
                confirm("confirm", &format!("Delete {filename}?")).await?;
                Ok::<_, String>(format!("Deleted {filename}"))
            },
        )
        .add(plain("multi_input"), |_: NoArgs, _: Output| async {
            sleep_ms(fixtures::TASK_WORK_MS);
            // Both at once: they go in one round.
            let (first, second) = futures::join!(
                confirm("first", "First confirmation?"),
                confirm("second", "Second confirmation?"),
            );
            first?;
            second?;
            Ok::<_, String>("both confirmed")
        })
        .add(plain("test_tool_with_task"), |_: NoArgs, _: Output| async {
            let name = ask("user_name", "What is your name?", "name").await?;
            sleep_ms(fixtures::TASK_WORK_MS);
            Ok::<_, String>(format!("Hello, {name}! The task is done."))
        });
}

/// The diagnostic and input-request tools of the 2026-07-28 scenarios.
fn mrtr_tools(tools: &mut Tools) {
    tools
        .add(
            plain("test_missing_capability"),
            |_: NoArgs, _: Output| async {
                sample_keyed("probe", "Say anything").await?;
                Ok::<_, String>("Success")
            },
        )
        .add(
            plain("test_streaming_elicitation"),
            |_: NoArgs, _: Output| async {
                ask("stream_answer", "Anything to add?", "answer").await
            },
        )
        .add(plain("test_logging_tool"), |_: NoArgs, _: Output| async {
            host::info("test_logging_tool ran");
            "Logged"
        })
        .add(
            plain("test_trigger_tool_change"),
            |_: NoArgs, _: Output| async { trigger("tools", ListKind::Tools) },
        )
        .add(
            plain("test_trigger_prompt_change"),
            |_: NoArgs, _: Output| async { trigger("prompts", ListKind::Prompts) },
        )
        .add(plain("test_dynamic_tool"), |_: NoArgs, _: Output| async {
            "dynamic"
        })
        .add(
            plain("test_input_required_result_elicitation"),
            |_: NoArgs, _: Output| async {
                let name = ask("user_name", "What is your name?", "name").await?;
                Ok::<_, String>(format!("Hello, {name}!"))
            },
        )
        .add(
            plain("test_input_required_result_sampling"),
            |_: NoArgs, _: Output| async {
                sample_keyed("capital_question", "What is the capital of France?").await
            },
        )
        .add(
            plain("test_input_required_result_list_roots"),
            |_: NoArgs, _: Output| async {
                let roots = host::list_roots().await?;
                Ok::<_, String>(format!("Roots: {}", roots["roots"]))
            },
        )
        .add(
            plain("test_input_required_result_request_state"),
            |_: NoArgs, _: Output| async {
                ask("confirm", "Confirm?", "ok").await?;
                Ok::<_, String>("state-ok")
            },
        )
        .add(
            plain("test_input_required_result_multiple_inputs"),
            |_: NoArgs, _: Output| async {
                // All three at once: they go in one round.
                let (name, greeting, roots) = futures::join!(
                    ask("user_name", "What is your name?", "name"),
                    sample_keyed("greeting", "Write a greeting"),
                    host::list_roots(),
                );
                Ok::<_, String>(format!(
                    "name={}, greeting={}, roots={}",
                    name?, greeting?, roots?["roots"]
                ))
            },
        )
        .add(
            plain("test_input_required_result_multi_round"),
            |_: NoArgs, _: Output| async {
                let name = ask("name", "What is your name?", "name").await?;
                let color =
                    ask("color", &format!("{name}, your favourite colour?"), "color").await?;
                Ok::<_, String>(format!("{name} likes {color}"))
            },
        )
        .add(
            plain("test_input_required_result_tampered_state"),
            |_: NoArgs, _: Output| async {
                ask("confirm", "Confirm?", "ok").await?;
                Ok::<_, String>("confirmed")
            },
        )
        .add(
            plain("test_input_required_result_capabilities"),
            |_: NoArgs, _: Output| async {
                match ask("user_choice", "Pick one", "choice").await {
                    Ok(choice) => Ok(format!("user chose {choice}")),
                    Err(_) => sample_keyed("model_choice", "Pick one")
                        .await
                        .map(|c| format!("model chose {c}")),
                }
            },
        );
}

struct Conformance;

impl Plugin for Conformance {
    fn tools(tools: &mut Tools) {
        tools
            .add(plain("test_simple_text"), |_: NoArgs, _: Output| async {
                fixtures::SIMPLE_TEXT
            })
            .add(plain("test_image_content"), |_: NoArgs, _: Output| async {
                fixtures::image()
            })
            .add(plain("test_audio_content"), |_: NoArgs, _: Output| async {
                fixtures::audio()
            })
            .add(
                plain("test_embedded_resource"),
                |_: NoArgs, _: Output| async { fixtures::embedded() },
            )
            .add(
                plain("test_multiple_content_types"),
                |_: NoArgs, _: Output| async { fixtures::mixed() },
            )
            .add(plain("test_tool_with_logging"), with_logging)
            .add(plain("test_tool_with_progress"), with_progress)
            .add(plain("test_error_handling"), |_: NoArgs, _: Output| async {
                ToolResult::error(fixtures::ERROR_TEXT)
            })
            .add(plain("test_sampling"), sampling)
            .add(
                plain("test_elicitation"),
                |ElicitationArgs { message }: ElicitationArgs, _: Output| async move {
                    elicit(fixtures::elicitation_request(&message), "User response").await
                },
            )
            .add(
                plain("test_elicitation_sep1034_defaults"),
                |_: NoArgs, _: Output| async {
                    elicit(fixtures::defaults_request(), "Elicitation completed").await
                },
            )
            .add(
                plain("test_elicitation_sep1330_enums"),
                |_: NoArgs, _: Output| async {
                    elicit(fixtures::enums_request(), "Elicitation completed").await
                },
            )
            .add(
                plain("json_schema_2020_12_tool"),
                |args: Value, _: Output| async move {
                    format!("JSON Schema 2020-12 tool called with: {args}")
                },
            );
        mrtr_tools(tools);
        task_tools(tools);
        // Last, so the header-validation scenario's first tool stays what it was.
        tools.add(
            plain("test_custom_headers"),
            |args: Value, _: Output| async move {
                format!("Custom headers test completed: {args}")
            },
        );
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

mcpbox_sdk::p3::export!(Conformance);

// The 0.2 fixture's skills go into the component too.
mcpbox_sdk::skills!("../conformance/skills");
