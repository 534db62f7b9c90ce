//! Values derived from a sensitive variable in resource attributes and a job's `env`
//! (issue 50): every view prints `(sensitive)` in their place: `plan` as text, markdown
//! and `--json` (the launches' env included), `show PLANFILE` in each format, `apply`,
//! `state show`, and the next plan's update of the value.

use crate::engine_cli::{Fleet, PROVIDER, pool};

const VALUE: &str = "s3cr3t-token";

/// A pool whose label reads the variable through a local, a template whose env reads it
/// directly, and a job of that template on that pool.
fn spec(value: &str) -> String {
    format!(
        r#"{PROVIDER}
variable "token" {{
  type      = string
  default   = "{value}"
  sensitive = true
}}

locals {{
  team = "team-${{var.token}}"
}}
{}
job_template "ft" {{
  image = "ghcr.io/example/ft:1"
  gpus  = 1
  env = {{
    TOKEN = var.token
    PLAIN = "plain-value"
  }}
}}

job "run" {{
  template = job_template.ft
  pool     = gpu_pool.train
}}
"#,
        pool("train", &["us-east-1a"], 1, "  labels = { team = local.team, owner = \"ml\" }")
    )
}

#[track_caller]
fn hidden(what: &str, text: &str) {
    assert!(!text.contains("s3cr3t"), "{what} prints a sensitive value:\n{text}");
}

#[test]
fn attributes_and_job_env_derived_from_a_sensitive_variable_print_sensitive_in_every_view() {
    let fleet = Fleet::new(&spec(VALUE));
    let plan = fleet.run(&["plan", "-out", "saved.plan"]).expect(0);
    hidden("plan", &plan.stdout);
    assert!(plan.stdout.contains("+ labels.team    = (sensitive)\n"), "{}", plan.stdout);
    assert!(plan.stdout.contains("+ labels.owner   = \"ml\"\n"), "plain attributes stay: {}", plan.stdout);
    assert!(plan.stdout.contains("+ env.TOKEN = (sensitive)\n"), "{}", plan.stdout);
    assert!(plan.stdout.contains("+ env.PLAIN = \"plain-value\"\n"), "{}", plan.stdout);

    let markdown = fleet.run(&["plan", "--format", "markdown"]).expect(0);
    hidden("plan --format markdown", &markdown.stdout);
    assert!(markdown.stdout.contains("(sensitive)"), "{}", markdown.stdout);

    let json = fleet.plan_json();
    hidden("plan --json", &json.to_string());
    let change = |a: &str| json["changes"].as_array().unwrap().iter().find(|c| c["address"] == a).unwrap().clone();
    assert_eq!(change("gpu_pool.train")["sensitive"], serde_json::json!(["labels.team"]));
    assert_eq!(change("gpu_pool.train")["after"]["labels"]["team"], "(sensitive)");
    assert_eq!(change("gpu_pool.train")["after"]["labels"]["owner"], "ml");
    assert_eq!(change("job_template.ft")["after"]["env"]["TOKEN"], "(sensitive)");
    assert!(change("job.run").get("sensitive").is_none(), "a job naming the template is not sensitive");
    let env = &json["jobs"][0]["launches"][0]["env"];
    assert_eq!(env["TOKEN"], "(sensitive)", "{json:#}");
    assert_eq!(env["PLAIN"], "plain-value", "{json:#}");

    for args in [
        &["show", "saved.plan"][..],
        &["show", "saved.plan", "--json"],
        &["show", "saved.plan", "--format", "markdown"],
    ] {
        let shown = fleet.run(args).expect(0);
        hidden(&args.join(" "), &shown.stdout);
        assert!(shown.stdout.contains("(sensitive)"), "{args:?}: {}", shown.stdout);
    }

    let applied = fleet.run(&["apply", "saved.plan"]).expect(0);
    hidden("apply", &format!("{}{}", applied.stdout, applied.stderr));
    // The state keeps the value (it is applied from there), and the paths to hide.
    assert_eq!(fleet.state().resources["gpu_pool.train"].sensitive, vec!["labels.team".to_string()]);
    let shown = fleet.run(&["state", "show", "job_template.ft"]).expect(0);
    hidden("state show", &shown.stdout);
    assert!(shown.stdout.contains("\"TOKEN\": \"(sensitive)\""), "{}", shown.stdout);
    let shown = fleet.run(&["state", "show", "gpu_pool.train"]).expect(0);
    hidden("state show", &shown.stdout);

    // A new value is an update of sensitive attributes: both sides hidden.
    fleet.write_spec(&spec("n3w-s3cr3t"));
    let update = fleet.run(&["plan"]).expect(0);
    hidden("an update's plan", &update.stdout);
    assert!(update.stdout.contains("~ labels.team = (sensitive)\n"), "{}", update.stdout);
    assert!(update.stdout.contains("~ env.TOKEN = (sensitive)\n"), "{}", update.stdout);
    let json = fleet.plan_json();
    hidden("an update's plan --json", &json.to_string());
}
