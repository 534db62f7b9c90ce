//! The command line: clap structs, [`Settings`] resolution and one thin file per command.
//!
//! [`run`] parses the raw arguments, resolves them once into [`Settings`] and hands both to
//! the command's file, which calls into the library and renders. Commands own no logic of
//! their own: anything a test would want to call without a process belongs in the library.
//! Data goes to stdout; progress, warnings and diagnostics to stderr.
//!
//! Adding a command: give its variant a `run` in its own file (`plan.rs`: `pub fn run(&Settings,
//! &PlanArgs) -> miette::Result<ExitStatus>`, or `async fn` wrapped in `runtime::block_on`)
//! and add one arm to `dispatch`.

mod addresses;
mod allocator;
mod apply;
mod check;
mod common;
mod cost;
mod dash;
mod drift;
mod error;
mod exit;
mod fmt;
mod graph;
mod health;
mod import;
mod import_ids;
mod init;
mod jobs;
mod load;
mod nodes;
mod offers;
mod output;
mod outputs;
mod pages;
mod plan;
mod reconcile;
mod runtime;
mod settings;
mod show;
mod sim;
mod sim_args;
mod state_common;
mod state_list;
mod state_mv;
mod state_rekey;
mod state_remote;
mod state_rm;
mod state_show;
mod state_unlock;
mod test;
mod validate;
mod value_parsers;
mod vars;
mod verdicts;
mod workspace;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::spec::model::ProviderKind;

pub use error::CliError;
pub use exit::ExitStatus;
pub use pages::small_pages_from_the_start;
pub use settings::Settings;
pub use sim_args::{SimCommand, SimFault};
use value_parsers::{parse_duration, parse_interval, parse_provider};

/// Parse `args` (program name first), run the command, report its error if any.
pub fn run<I, T>(args: I) -> ExitStatus
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    use clap::{CommandFactory, FromArgMatches};
    let args = dash::long_flags(args.into_iter().map(Into::into).collect());
    // Parsed in two steps, as `try_parse_from` does, to keep the matches: they know the
    // order of `--var` and `--var-file` on the command line.
    let parsed = Cli::command()
        .try_get_matches_from(args)
        .and_then(|m| Ok((Cli::from_arg_matches(&m).map_err(|e| e.format(&mut Cli::command()))?, m)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            let _ = e.print();
            // `--help` and `--version` are not failures; usage errors exit 1 like every other
            // error (docs/design/cli.md reserves 2 and 3 for changes and policy denials).
            return if e.use_stderr() { ExitStatus::Error } else { ExitStatus::Success };
        }
    };
    let settings = match Settings::resolve(&cli.global, &vars::in_order(&cli.command, &matches)) {
        Ok(s) => s,
        Err(e) => {
            e.print(settings::stderr_color_from_env(cli.global.no_color));
            return ExitStatus::Error;
        }
    };
    if let Err(e) = workspace::check_exists(&settings, &cli.command) {
        e.print(settings.color_stderr);
        return ExitStatus::Error;
    }
    pages::fit(&settings);
    allocator::leave_memory_to_exit();
    let status = match dispatch(&cli.command, &settings) {
        Ok(status) => status,
        Err(report) => {
            error::print_report(&report, &settings);
            ExitStatus::Error
        }
    };
    match output::stdout_error() {
        None => status,
        Some(e) => {
            let report = miette::miette!(
                code = "gpuplan::cli::stdout",
                help = "free space where stdout goes (or send it elsewhere) and run the command again",
                "the command ran, but its output could not be written to stdout: {e}"
            );
            error::print_report(&report, &settings);
            ExitStatus::Error
        }
    }
}

fn dispatch(command: &Command, settings: &Settings) -> miette::Result<ExitStatus> {
    match command {
        Command::Validate(args) => validate::run(settings, args),
        Command::Fmt(args) => fmt::run(settings, args),
        Command::Graph(args) => graph::run(settings, args),
        Command::Plan(args) => plan::run(settings, args),
        Command::Apply(args) => apply::apply(settings, args),
        Command::Destroy(args) => apply::destroy(settings, args),
        Command::Drift(args) => drift::run(settings, args),
        Command::Nodes(args) => nodes::run(settings, args),
        Command::Reconcile(args) => reconcile::run(settings, args),
        Command::Cost(args) => cost::run(settings, args),
        Command::Offers(args) => offers::run(settings, args),
        Command::Import(args) => import::run(settings, args),
        Command::Sim(command) => sim::run(settings, command),
        Command::Jobs(args) => jobs::run(settings, args.command.as_ref()),
        Command::Init(args) => init::run(settings, args),
        Command::Show(args) => show::run(settings, args),
        Command::Output(args) => outputs::run(settings, args),
        Command::Check => check::run(settings),
        Command::Test(args) => test::run(settings, args),
        Command::Completions { shell } => show::completions(*shell),
        Command::Workspace(command) => workspace::run(settings, command),
        Command::State(StateCommand::List) => state_list::run(settings),
        Command::State(StateCommand::Show { addr }) => state_show::run(settings, addr),
        Command::State(StateCommand::Rm { addrs }) => state_rm::run(settings, addrs),
        Command::State(StateCommand::Mv { from, to }) => state_mv::run(settings, from, to),
        Command::State(StateCommand::Unlock { id }) => state_unlock::run(settings, id),
        Command::State(StateCommand::Pull) => state_remote::pull(settings),
        Command::State(StateCommand::Push { file, force }) => state_remote::push(settings, file, *force),
        Command::State(StateCommand::Rekey { decrypt }) => state_rekey::run(settings, *decrypt),
    }
}

/// `gpuplan [-C DIR] [--state PATH] [--workspace NAME] [--no-color] COMMAND`
#[derive(Debug, Parser)]
#[command(
    name = "gpuplan",
    version,
    about = "Terraform for GPU fleets: plan, cost, apply and reconcile GPU pools across clouds",
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// `--var` and `--var-file`, declared once for every command that evaluates the spec.
#[derive(Debug, Clone, Default, Args)]
pub struct VarArgs {
    /// Set a variable, e.g. `--var team=ml` (repeatable; with --var-file, later wins)
    #[arg(long, value_name = "NAME=VALUE")]
    pub var: Vec<String>,
    /// Set variables from FILE: HCL `name = value` lines or a YAML mapping (repeatable)
    #[arg(long, value_name = "FILE")]
    pub var_file: Vec<PathBuf>,
}

impl VarArgs {
    /// The pairs and the files, as typed.
    pub fn pairs(&self) -> (&[String], &[PathBuf]) {
        (&self.var, &self.var_file)
    }
}

/// `--override-policy` and `--policy-dir`, declared once for every command that checks a
/// plan against the policies.
#[derive(Debug, Clone, Default, Args)]
pub struct PolicyArgs {
    /// Accept a failing soft policy by name (repeatable)
    #[arg(long, value_name = "NAME")]
    pub override_policy: Vec<String>,
    /// Also load policies from DIR (repeatable) [default: <DIR>/policies]
    #[arg(long, value_name = "DIR")]
    pub policy_dir: Vec<PathBuf>,
}

/// Flags every command accepts, before or after the command name.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Run as if started in DIR: specs, `state/` and `policies/` are looked up there
    #[arg(short = 'C', value_name = "DIR", global = true)]
    pub dir: Option<PathBuf>,
    /// State file of the local backend [default: <DIR>/state/<WORKSPACE>.json]
    #[arg(long, value_name = "PATH", global = true)]
    pub state: Option<PathBuf>,
    /// Workspace: selects the state [default: `GPUPLAN_WORKSPACE`, else the one `gpuplan
    /// workspace select` chose, else `default`]
    #[arg(long, value_name = "NAME", global = true)]
    pub workspace: Option<String>,
    /// Plain output without colours (also with `NO_COLOR` set or without a terminal)
    #[arg(long, global = true)]
    pub no_color: bool,
    /// How long to wait for another run's state lock, e.g. `30s`, `2m`
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = parse_duration, global = true)]
    pub lock_timeout: Duration,
    /// Ask for confirmation (on the terminal, else read from standard input); `--input=false`
    /// refuses to ask: pass `--auto-approve` or a saved plan instead
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_missing_value = "true", global = true)]
    pub input: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the state folder and an example spec if none; check a remote backend
    Init(InitArgs),
    /// Parse and check every spec file; all problems in one run
    Validate(ValidateArgs),
    /// Check every provider's credentials, endpoint and region, and the state backend
    Check,
    /// Rewrite HCL/YAML specs in canonical format
    Fmt(FmtArgs),
    /// Refresh, diff, cost and check policies: show what apply would do
    Plan(PlanArgs),
    /// Print a saved plan (`plan --out FILE`) without touching state or clouds
    Show(ShowArgs),
    /// Print the fleet's output values from state
    Output(OutputArgs),
    /// Execute a saved plan, or plan and confirm
    Apply(ApplyArgs),
    /// Remove everything the state owns
    Destroy(DestroyArgs),
    /// Show what the clouds run that the state or spec does not say
    Drift(DriftArgs),
    /// List the pools' nodes with their GPU health, after a refresh
    Nodes(NodesArgs),
    /// Refresh, autoscale, plan and apply within policy, on a schedule
    Reconcile(ReconcileArgs),
    /// Print the dependency graph
    Graph(GraphArgs),
    /// Price breakdown of the fleet
    Cost(CostArgs),
    /// Cheapest offers for a GPU model across clouds
    Offers(OffersArgs),
    /// List GPU instances no gpuplan state owns and write pools and `import` blocks for them;
    /// or, given `ADDR ID...`, import those instances into that pool now
    Import(ImportArgs),
    /// Inspect and repair state
    #[command(subcommand)]
    State(StateCommand),
    /// Launched jobs
    Jobs(JobsArgs),
    /// Controls of the embedded simulated cloud
    #[command(subcommand)]
    Sim(SimCommand),
    /// Run the fleet's tests (`tests/*.test.hcl`) against private simulated clouds
    Test(TestArgs),
    /// Workspaces: states of their own for one spec (`list`, `new`, `select`, `show`, `delete`)
    #[command(subcommand)]
    Workspace(workspace::WorkspaceCommand),
    /// Print shell completions for bash, zsh or fish
    Completions {
        #[arg(value_enum, value_name = "SHELL")]
        shell: CompletionShell,
    },
}

impl Command {
    /// `--var` pairs and `--var-file`s as typed, for the commands that take them.
    pub fn vars(&self) -> Option<(&[String], &[PathBuf])> {
        match self {
            Command::Validate(a) => Some(a.vars.pairs()),
            Command::Plan(a) => Some(a.vars.pairs()),
            Command::Apply(a) => Some(a.vars.pairs()),
            Command::Reconcile(a) => Some(a.vars.pairs()),
            Command::Destroy(a) => Some(a.vars.pairs()),
            _ => None,
        }
    }
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Print diagnostics as JSON on stdout
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub vars: VarArgs,
    /// Also check the policies of DIR (repeatable) [default: <DIR>/policies]
    #[arg(long, value_name = "DIR")]
    pub policy_dir: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Only this test file, e.g. `tests/policies.test.hcl` (repeatable)
    #[arg(long, value_name = "FILE")]
    pub filter: Vec<PathBuf>,
    /// Only the runs of this name (repeatable)
    #[arg(long, value_name = "NAME")]
    pub run: Vec<String>,
    /// Also write the results as JUnit XML to FILE, for CI
    #[arg(long, value_name = "FILE")]
    pub junit_xml: Option<PathBuf>,
    /// Print the results as JSON on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct FmtArgs {
    /// Write nothing; print a diff of each unformatted file and exit 1 if there is any
    #[arg(long)]
    pub check: bool,
    /// Print a diff of each file that formatting changes
    #[arg(long)]
    pub diff: bool,
    /// Files or directories to format [default: the working directory]
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    Text,
    Json,
    Markdown,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Save the plan to FILE for `gpuplan apply FILE`
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Shorthand for `--format json`
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// How to print the plan
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<PlanFormat>,
    /// Exit 2 when the plan has changes
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Plan the removal of everything the state owns, for review (`apply FILE` executes it)
    #[arg(long)]
    pub destroy: bool,
    /// Ask the clouds what runs before planning (`--refresh=false` plans from state alone)
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub refresh: bool,
    /// Plan only this resource and what it depends on (repeatable)
    #[arg(long, value_name = "ADDR")]
    pub target: Vec<String>,
    /// Replace every node of this pool though nothing changed, new nodes first (repeatable)
    #[arg(long, value_name = "ADDR")]
    pub replace: Vec<String>,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// List the policies that passed, not only their count
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

impl PlanArgs {
    pub fn output_format(&self) -> PlanFormat {
        if self.json { PlanFormat::Json } else { self.format.unwrap_or(PlanFormat::Text) }
    }
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// One output [default: all of them]
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Print as JSON: all outputs as `{NAME: {sensitive, type, value}}`, or NAME's value
    #[arg(long, conflicts_with = "raw")]
    pub json: bool,
    /// Print NAME's value as it is (a string without quotes, a number or a bool), with no
    /// final newline: for scripts
    #[arg(long)]
    pub raw: bool,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A plan saved with `gpuplan plan --out` (refused when the state moved since)
    #[arg(value_name = "PLANFILE")]
    pub planfile: Option<PathBuf>,
    /// Apply without asking for confirmation
    #[arg(long)]
    pub auto_approve: bool,
    /// At most N operations at once
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub parallelism: u32,
    /// Apply only this resource and what it depends on (repeatable)
    #[arg(long, value_name = "ADDR")]
    pub target: Vec<String>,
    /// Replace every node of this pool though nothing changed, new nodes first (repeatable)
    #[arg(long, value_name = "ADDR")]
    pub replace: Vec<String>,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// List the policies that passed, not only their count
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

#[derive(Debug, Args)]
pub struct DestroyArgs {
    /// Destroy without asking for confirmation
    #[arg(long)]
    pub auto_approve: bool,
    /// Print the plan as JSON on stdout (as `plan --destroy --json`); needs --auto-approve
    #[arg(long)]
    pub json: bool,
    /// Not taken: a reviewable destroy is `plan --destroy --out FILE` (refused with that hint)
    #[arg(long, value_name = "FILE", hide = true)]
    pub out: Option<PathBuf>,
    /// At most N operations at once
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub parallelism: u32,
    /// Destroy only this resource and what depends on it (repeatable)
    #[arg(long, value_name = "ADDR")]
    pub target: Vec<String>,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// List the policies that passed, not only their count
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

#[derive(Debug, Args)]
pub struct DriftArgs {
    /// Exit 2 when there is drift
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Print drift as JSON on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct NodesArgs {
    /// Only nodes with a GPU fault their pool counts
    #[arg(long)]
    pub unhealthy: bool,
    /// Print the nodes as JSON on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// Run one pass and exit (the default without --interval)
    #[arg(long, conflicts_with = "interval")]
    pub once: bool,
    /// Run a pass every DUR (±10% jitter) until Ctrl-C or SIGTERM, e.g. `5m`
    #[arg(long, value_name = "DUR", value_parser = parse_interval)]
    pub interval: Option<Duration>,
    /// Plan each pass but apply nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Refuse to apply a pass that would terminate more than N nodes
    #[arg(long, value_name = "N")]
    pub max_destroy: Option<u32>,
    /// Print one JSON object per pass (one line each) on stdout
    #[arg(long)]
    pub json: bool,
    /// With --once: exit 2 when the pass found changes (applied, or planned with --dry-run)
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics, e.g. `127.0.0.1:9464` (port 0: any free port)
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// At most N operations at once
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub parallelism: u32,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// List the policies that passed, not only their count
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Plan and apply only while holding a Kubernetes Lease (run several replicas: one leads)
    #[arg(long, requires = "interval")]
    pub leader_elect: bool,
    /// The coordination.k8s.io/v1 Lease to hold
    #[arg(long, value_name = "NAME", default_value = "gpuplan")]
    pub lease_name: String,
    /// The Lease's namespace [default: the kubeconfig context's, or the pod's own]
    #[arg(long, value_name = "NS")]
    pub lease_namespace: Option<String>,
    /// How long the Lease holds without renewal (whole seconds, rounded up); a leader steps down after 2/3 of it
    #[arg(long, value_name = "DUR", default_value = "15s", value_parser = parse_interval)]
    pub lease_duration: Duration,
    /// This replica's name in the Lease [default: $POD_NAME, else <hostname>-<pid>]
    #[arg(long, value_name = "ID")]
    pub lease_identity: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    Dot,
    Mermaid,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Graph language
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "dot")]
    pub format: GraphFormat,
}

#[derive(Debug, Args)]
pub struct CostArgs {
    /// Print the breakdown as JSON on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct OffersArgs {
    /// GPU model from the catalog, e.g. `A100-80GB`
    #[arg(long, value_name = "MODEL")]
    pub gpu: String,
    /// GPUs needed in total
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub count: Option<u32>,
    /// Price spot capacity instead of on-demand
    #[arg(long)]
    pub spot: bool,
    /// Only this cloud
    #[arg(long, value_name = "P", value_parser = parse_provider)]
    pub provider: Option<ProviderKind>,
    /// Only this region
    #[arg(long, value_name = "R")]
    pub region: Option<String>,
    /// Print offers as JSON on stdout
    #[arg(long)]
    pub json: bool,
    /// Catalog prices only: do not ask the spec's cloud providers for live quotes
    #[arg(long)]
    pub offline: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Import the instances IDs into this pool now, as an `import {}` block applied at once
    #[arg(value_name = "ADDR", conflicts_with_all = ["region", "filter", "generate_config_out"])]
    pub address: Option<String>,
    /// Instance IDs on the pool's provider
    #[arg(value_name = "ID", requires = "address")]
    pub ids: Vec<String>,
    /// The provider block (its local name or alias) [default: the only provider block]
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// The region [default: the provider block's]
    #[arg(long, value_name = "R")]
    pub region: Option<String>,
    /// Only instances with this tag (repeatable; all must match)
    #[arg(long, value_name = "KEY=VALUE")]
    pub filter: Vec<String>,
    /// Write `gpu_pool` and `import` blocks to FILE, which must not exist
    #[arg(long, value_name = "FILE")]
    pub generate_config_out: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// List the addresses the state holds
    List,
    /// Show one resource's recorded attributes (`gpu_pool.train`, or `train` where only one kind has that name)
    Show {
        #[arg(value_name = "ADDR")]
        addr: String,
    },
    /// Forget resources without touching the clouds
    Rm {
        #[arg(value_name = "ADDR", required = true)]
        addrs: Vec<String>,
    },
    /// Rename a resource; a pool's instances are retagged in place, none replaced
    Mv {
        #[arg(value_name = "FROM")]
        from: String,
        #[arg(value_name = "TO")]
        to: String,
    },
    /// Remove a stale lock left by a crashed run
    Unlock {
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Print the current state (local or remote) as JSON
    Pull,
    /// Replace the state with FILE (same lineage and a higher serial, unless --force)
    Push {
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Push even a state of another lineage or a lower serial
        #[arg(long)]
        force: bool,
    },
    /// Encrypt the state and its backup again with the `encryption` block's key provider (read with its fallback)
    Rekey {
        /// Store them unencrypted (with the `encryption` block removed), read with the key provider they name
        #[arg(long)]
        decrypt: bool,
    },
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A plan saved with `gpuplan plan --out FILE`
    #[arg(value_name = "PLANFILE")]
    pub planfile: PathBuf,
    /// Shorthand for `--format json`
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// How to print the plan
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<PlanFormat>,
    /// List the policies that passed, not only their count
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Copy the local state into the remote backend the spec configures
    #[arg(long)]
    pub migrate_state: bool,
}

#[derive(Debug, Args)]
pub struct JobsArgs {
    /// [default: list]
    #[command(subcommand)]
    pub command: Option<JobsCommand>,
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List launched jobs
    List {
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// Show one job's replicas and their state (also `jobs show`)
    #[command(visible_alias = "show")]
    Status {
        name: String,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// Print a job's output (Kubernetes pods' logs, per replica) or, where gpuplan cannot
    /// read it, its launch history
    Logs {
        name: String,
        /// Keep printing the output as the job writes it, until it ends
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Stop a job
    Cancel { name: String },
    /// Print what would be submitted for a job (e.g. its Kubernetes manifest)
    Render { name: String },
}
