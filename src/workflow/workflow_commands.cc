// The workflow commands: `lote setup`, `lote resources create|cleanup`,
// `lote submit` and `lote report` (see workflow.h, report.h, docs/workflow.md).
// In an example folder they read ./config.txt, so
//   cd examples/llama2 && lote setup && lote data prepare && lote resources create && lote submit
// mirrors the recipe's scripts one for one.
//
// Exit codes: 0 done, 1 an error (the message says what to do), and for
// `lote submit --follow/--wait` the job's outcome (0 SUCCEEDED, 1 FAILED).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/batch_client.h"
#include "cli/job_watch.h"
#include "common/files.h"
#include "common/recipe_config.h"
#include "lote/registry.h"
#include "workflow/report.h"
#include "workflow/workflow.h"

namespace lote::workflow {
namespace {

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int Fail(const char* command, const Status& st) {
  std::fprintf(stderr, "lote %s: %s\n", command, st.message().c_str());
  return 1;
}

// --endpoint, else the config's LOTE_ENDPOINT, else the usual resolution
// (cli::ResolveEndpoint); the region from the config unless the environment sets one.
Result<std::unique_ptr<cli::BatchClient>> Connect(const std::string& endpoint,
                                                  const RecipeConfig* config) {
  cli::ClientOptions options;
  options.endpoint = endpoint;
  if (options.endpoint.empty() && config != nullptr) {
    options.endpoint = config->GetOr("LOTE_ENDPOINT", "");
  }
  if (config != nullptr && std::getenv("AWS_REGION") == nullptr &&
      std::getenv("AWS_DEFAULT_REGION") == nullptr) {
    options.region = config->GetOr("REGION", "");
  }
  return cli::BatchClient::Connect(options);
}

void AddCommon(CLI::App* sub, std::string* config_file, std::string* endpoint) {
  sub->add_option("--config-file", *config_file, "The recipe's config (default ./config.txt)");
  if (endpoint != nullptr) {
    sub->add_option("--endpoint", *endpoint,
                    "Server URL; default LOTE_ENDPOINT of the config, $LOTE_ENDPOINT, "
                    "$AWS_ENDPOINT_URL_BATCH or http://127.0.0.1:7480");
  }
}

// Follows or waits for a job and returns its exit code.
int Watch(cli::BatchClient* client, const std::string& job_id, bool follow) {
  Result<cli::JobOutcome> outcome = Status::Internal("unset");
  if (follow) {
    cli::LogsOptions options;
    options.job_id = job_id;
    options.follow = true;
    cli::Sleeper real = cli::RealSleeper();
    auto write = [](std::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); };
    outcome = cli::RunLogs(client, options, write, SystemClock::Default(), [&real](int64_t ms) {
      std::fflush(stdout);
      real(ms);
    });
    std::fflush(stdout);
  } else {
    outcome =
        cli::WaitForJob(client, job_id, std::nullopt, SystemClock::Default(), cli::RealSleeper());
  }
  if (!outcome.ok()) return Fail("submit", outcome.status());
  std::fprintf(follow ? stderr : stdout, "%s\n", cli::FormatOutcome(*outcome).c_str());
  return outcome->exit_code;
}

void RegisterSetup(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  auto* sub = app.add_subcommand(
      "setup",
      "Render the example's templates/*.json with config.txt into build/ (the recipe's "
      "setup.sh; an undefined variable is an error naming it)");
  AddCommon(sub, file.get(), nullptr);
  sub->callback([file] {
    Result<RecipeConfig> config = LoadRecipeConfig(*file);
    if (!config.ok()) return SetExitCode(Fail("setup", config.status()));
    Result<std::vector<std::string>> written = Setup(*config, Say);
    if (!written.ok()) return SetExitCode(Fail("setup", written.status()));
    // Container mode (RUNTIME=container, docs/workflow.md) needs the image first.
    if (config->GetOr("RUNTIME", "process") == "container") {
      Say("next: eval \"$(lote env)\"; lote data prepare && ./build_image.sh && lote resources "
          "create && lote submit");
    } else {
      Say("next: lote data prepare && lote resources create && lote submit");
    }
  });
}

void RegisterResources(CLI::App& app) {
  auto* res =
      app.add_subcommand("resources",
                         "Create or clean up the example's compute environment, job queue and job "
                         "definition (from build/, written by `lote setup`)");
  res->require_subcommand(1);
  struct Args {
    std::string file, endpoint;
    int timeout_s = 300;
  };
  for (const bool create : {true, false}) {
    auto args = std::make_shared<Args>();
    auto* sub =
        create ? res->add_subcommand("create",
                                     "Compute environment → wait VALID → job definition → job "
                                     "queue → wait VALID; what exists is kept (idempotent)")
               : res->add_subcommand("cleanup",
                                     "Disable the queue → wait → delete; the same for the compute "
                                     "environment; deregister the job definition (idempotent)");
    AddCommon(sub, &args->file, &args->endpoint);
    sub->add_option("--timeout", args->timeout_s, "Seconds to wait for each resource")
        ->capture_default_str();
    sub->callback([args, create] {
      const char* name = create ? "resources create" : "resources cleanup";
      Result<RecipeConfig> config = LoadRecipeConfig(args->file);
      if (!config.ok()) return SetExitCode(Fail(name, config.status()));
      auto client = Connect(args->endpoint, &*config);
      if (!client.ok()) return SetExitCode(Fail(name, client.status()));
      WaitOptions wait;
      wait.timeout_ms = int64_t{args->timeout_s} * 1000;
      Status st = create ? CreateResources(client->get(), *config, Say, wait)
                         : CleanupResources(client->get(), *config, Say, wait);
      if (!st.ok()) return SetExitCode(Fail(name, st));
      if (create) Say("next: lote submit");
    });
  }
}

struct SubmitArgs {
  std::string file, endpoint, resume_from, name;
  int32_t num_nodes = 0;
  int64_t max_steps = 0;
  bool follow = false, wait = false;
  CommandSubmit command;
  int32_t vcpus = 0, attempts = 0;
  int64_t memory = 0, timeout = 0;
};

void RegisterSubmit(CLI::App& app) {
  auto a = std::make_shared<SubmitArgs>();
  auto* sub = app.add_subcommand(
      "submit",
      "Submit the example's training job (reads ./config.txt and build/; with "
      "DO_PRE_COMPILATION=true a precompile job first), or any command:\n"
      "  lote submit --queue Q [--nodes 4 --vcpus 2 --memory 2048 --attempts 3 --timeout 600] "
      "-- COMMAND ARGS...");
  AddCommon(sub, &a->file, &a->endpoint);
  auto* num_nodes =
      sub->add_option("--num-nodes", a->num_nodes, "Nodes of the recipe's job (nodeOverrides)");
  auto* max_steps = sub->add_option("--max-steps", a->max_steps,
                                    "Optimizer steps (the job definition's max_steps parameter)");
  sub->add_option("--resume-from", a->resume_from,
                  "Start from a job's latest checkpoint (its id) or a checkpoint URI");
  sub->add_option("--name", a->name, "Job name (default JOB_NAME, or the command's name)");
  sub->add_flag("-f,--follow", a->follow, "Print the job's output until it ends");
  sub->add_flag("--wait", a->wait, "Wait for the job to end and print how it ended");
  sub->add_option("--queue", a->command.queue, "Job queue (the generic form)");
  sub->add_option("--nodes", a->command.nodes, "Nodes of a generic job (a gang when > 1)")
      ->capture_default_str();
  auto* vcpus = sub->add_option("--vcpus", a->vcpus, "vCPUs per node");
  auto* memory = sub->add_option("--memory", a->memory, "Memory per node, MiB");
  auto* attempts = sub->add_option("--attempts", a->attempts, "Attempts (retryStrategy)");
  auto* timeout = sub->add_option("--timeout", a->timeout, "Seconds per attempt");
  sub->add_option("--env", a->command.environment, "NAME=VALUE for the job (repeatable)");
  sub->add_option("--depends-on", a->command.depends_on, "Run after this job succeeds");
  sub->add_option("command", a->command.command, "The command of a generic job, after --");
  sub->callback([a, num_nodes, max_steps, vcpus, memory, attempts, timeout] {
    std::unique_ptr<cli::BatchClient> client;
    std::vector<std::string> watch_ids;  // in order: a precompile job before the main one
    if (!a->command.command.empty()) {
      if (num_nodes->count() > 0 || max_steps->count() > 0 || !a->resume_from.empty()) {
        return SetExitCode(Fail(
            "submit", Status::InvalidArgument("--num-nodes, --max-steps and --resume-from are "
                                              "for the recipe's job; a command uses --nodes")));
      }
      CommandSubmit c = a->command;
      c.name = a->name;
      if (vcpus->count() > 0) c.vcpus = a->vcpus;
      if (memory->count() > 0) c.memory_mib = a->memory;
      if (attempts->count() > 0) c.attempts = a->attempts;
      if (timeout->count() > 0) c.timeout_s = a->timeout;
      auto connected = Connect(a->endpoint, nullptr);
      if (!connected.ok()) return SetExitCode(Fail("submit", connected.status()));
      client = std::move(*connected);
      Result<SubmittedJob> job = SubmitCommand(client.get(), c, Say);
      if (!job.ok()) return SetExitCode(Fail("submit", job.status()));
      watch_ids.push_back(job->job_id);
    } else {
      if (!a->command.queue.empty()) {
        return SetExitCode(
            Fail("submit", Status::InvalidArgument("--queue needs a command: lote submit --queue Q "
                                                   "-- COMMAND ARGS...")));
      }
      Result<RecipeConfig> config = LoadRecipeConfig(a->file);
      if (!config.ok()) {
        return SetExitCode(Fail(
            "submit", config.status().WithContext(
                          "(or submit any command: lote submit --queue Q -- COMMAND ARGS...)")));
      }
      auto connected = Connect(a->endpoint, &*config);
      if (!connected.ok()) return SetExitCode(Fail("submit", connected.status()));
      client = std::move(*connected);
      RecipeSubmit r;
      if (num_nodes->count() > 0) r.num_nodes = a->num_nodes;
      if (max_steps->count() > 0) r.max_steps = a->max_steps;
      r.resume_from = a->resume_from;
      r.name = a->name;
      Result<std::vector<SubmittedJob>> jobs = SubmitRecipeJob(client.get(), *config, r, Say);
      if (!jobs.ok()) return SetExitCode(Fail("submit", jobs.status()));
      for (const SubmittedJob& j : *jobs) watch_ids.push_back(j.job_id);
    }
    if (a->follow || a->wait) {
      for (const std::string& id : watch_ids) {
        const int code = Watch(client.get(), id, a->follow);
        if (code != 0) return SetExitCode(code);
      }
      return;
    }
    const std::string& id = watch_ids.back();
    Say("follow it: lote logs " + id + " --follow   (or lote wait " + id + ")");
  });
}

void RegisterReport(CLI::App& app) {
  struct Args {
    std::string job_id, endpoint, csv, plot;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "report",
      "Summarize a training job: final and validation loss, tokens/s, MFU, the timeline of "
      "every node, its checkpoints; optionally the curve as CSV and a loss-curve PNG");
  sub->add_option("JOB_ID", a->job_id, "The job")->required();
  sub->add_option("--csv", a->csv, "Write step,attempt,loss,val_loss,lr,... to this file");
  sub->add_option("--plot", a->plot, "Draw the loss curve into this PNG (python3-matplotlib)");
  sub->add_option("--endpoint", a->endpoint,
                  "Server URL; default $LOTE_ENDPOINT, $AWS_ENDPOINT_URL_BATCH or "
                  "http://127.0.0.1:7480");
  sub->callback([a] {
    auto client = Connect(a->endpoint, nullptr);
    if (!client.ok()) return SetExitCode(Fail("report", client.status()));
    Result<JobReport> report = BuildReport(client->get(), a->job_id);
    if (!report.ok()) return SetExitCode(Fail("report", report.status()));
    std::fputs(FormatReport(*report).c_str(), stdout);
    if (!a->csv.empty()) {
      if (Status st = WriteFileAtomic(a->csv, ProgressCsv(*report)); !st.ok()) {
        return SetExitCode(Fail("report", st));
      }
      Say("  curve: " + a->csv);
    }
    if (!a->plot.empty()) {
      std::fflush(stdout);
      if (Status st = PlotLossCurve(*report, a->plot); !st.ok()) {
        return SetExitCode(Fail("report", st));
      }
      Say("  loss curve: " + a->plot);
    }
  });
}

CommandRegistrar reg([](CLI::App& app) {
  RegisterSetup(app);
  RegisterResources(app);
  RegisterSubmit(app);
  RegisterReport(app);
});

}  // namespace
}  // namespace lote::workflow
