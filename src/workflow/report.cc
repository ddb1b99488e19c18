#include "workflow/report.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>

#include "cli/job_watch.h"
#include "engine/memory_plan.h"
#include "logs/ingestor.h"

namespace lote::workflow {
namespace {

std::optional<double> Number(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// The value after `flag` in the job's command (the main node's range).
std::string CommandFlag(const Json& job, const std::string& flag) {
  std::vector<Json> commands;
  if (job.contains("container")) commands.push_back(job["container"].value("command", Json()));
  for (const Json& r :
       job.value("nodeProperties", Json::object()).value("nodeRangeProperties", Json::array())) {
    commands.push_back(r.value("container", Json::object()).value("command", Json()));
  }
  for (const Json& c : commands) {
    if (!c.is_array()) continue;
    for (size_t i = 0; i + 1 < c.size(); ++i) {
      if (c[i].is_string() && c[i].get<std::string>() == flag && c[i + 1].is_string()) {
        return c[i + 1].get<std::string>();
      }
    }
  }
  return "";
}

std::string Seconds(int64_t ms) {
  if (ms < 0) return "?";
  if (ms < 1000) return fmt::format("{} ms", ms);
  if (ms < 10'000) return fmt::format("{:.1f} s", ms / 1000.0);
  if (ms < 600'000) return fmt::format("{:.0f} s", ms / 1000.0);
  return fmt::format("{}m{:02}s", ms / 60'000, (ms / 1000) % 60);
}

std::string Cell(const std::optional<double>& v) {
  return v ? fmt::format("{:.6g}", *v) : std::string();
}

}  // namespace

Result<JobReport> BuildReport(cli::BatchClient* client, const std::string& job_id) {
  JobReport r;
  ASSIGN_OR_RETURN(r.job, client->DescribeJob(job_id));
  r.created_at_ms = r.job.value("createdAt", int64_t{0});
  const int32_t main_node =
      r.job.value("nodeProperties", Json::object()).value("mainNode", int32_t{0});

  // The curve: the main node's streams of every attempt, in order.
  ASSIGN_OR_RETURN(cli::JobLogPlan plan, cli::ReadJobLogPlan(client, job_id));
  for (const cli::StreamRef& s : plan.streams) {
    if (s.node != main_node && plan.multi_node) continue;
    cli::StreamPages pages(client, s.stream, std::nullopt);
    for (;;) {
      ASSIGN_OR_RETURN(std::vector<cli::LogLine> lines, pages.NextPage());
      if (lines.empty()) break;
      for (const cli::LogLine& line : lines) {
        if (!line.message.starts_with(logs::kProgressPrefix))
          continue;  // as the ingestor reads them
        Result<Json> j =
            ParseJson(std::string_view(line.message).substr(logs::kProgressPrefix.size()));
        if (!j.ok() || !j->is_object() || !j->contains("step")) continue;
        ProgressPoint p;
        p.attempt = s.attempt;
        p.step = j->value("step", int64_t{0});
        p.timestamp_ms = line.timestamp_ms;
        p.loss = Number(*j, "loss");
        p.val_loss = Number(*j, "val_loss");
        p.lr = Number(*j, "lr");
        p.grad_norm = Number(*j, "grad_norm");
        p.tokens_per_s = Number(*j, "tokens_per_s");
        p.mfu = Number(*j, "mfu");
        r.points.push_back(p);
      }
    }
  }

  // The timeline, from lote's loteTimeline of each ended attempt.
  int32_t number = 0;
  for (const Json& a : r.job.value("attempts", Json::array())) {
    ++number;
    const Json timeline = a.value("loteTimeline", Json::object());
    const int64_t placed = timeline.value("scheduledAt", int64_t{0});
    const Json nodes = timeline.value("nodes", Json::array());
    if (nodes.empty()) {
      NodeSpan span;
      span.attempt = number;
      span.placed_at_ms = placed;
      span.started_at_ms = a.value("startedAt", int64_t{0});
      span.stopped_at_ms = a.value("stoppedAt", int64_t{0});
      const Json c = a.value("container", Json::object());
      if (c.contains("exitCode")) span.exit_code = c.value("exitCode", int64_t{0});
      span.reason = c.value("reason", "");
      r.nodes.push_back(span);
      continue;
    }
    for (const Json& n : nodes) {
      NodeSpan span;
      span.attempt = number;
      span.node = n.value("nodeIndex", 0);
      span.placed_at_ms = placed;
      span.started_at_ms = n.value("startedAt", int64_t{0});
      span.stopped_at_ms = n.value("stoppedAt", int64_t{0});
      span.pull_started_at_ms = n.value("pullStartedAt", int64_t{0});
      span.pull_stopped_at_ms = n.value("pullStoppedAt", int64_t{0});
      if (n.contains("exitCode")) span.exit_code = n.value("exitCode", int64_t{0});
      r.nodes.push_back(span);
    }
  }

  // The checkpoints: <--checkpoint-uri>/<job id>/.
  std::string base = CommandFlag(r.job, "--checkpoint-uri");
  if (!base.empty()) {
    r.checkpoint_uri = engine::ResolveJobUri(job_id, base);
    Result<std::vector<engine::CheckpointSummary>> list = engine::ListCheckpoints(r.checkpoint_uri);
    if (list.ok()) {
      r.checkpoints = std::move(*list);
    } else {
      r.checkpoint_problem = list.status().message();
    }
  }
  return r;
}

std::string FormatReport(const JobReport& r) {
  std::string out;
  const Json& job = r.job;
  out += fmt::format("job {} ({}): {}", job.value("jobId", ""), job.value("jobName", ""),
                     job.value("status", ""));
  if (job.contains("failureCategory")) out += " [" + job.value("failureCategory", "") + "]";
  if (job.contains("statusReason")) out += ": " + job.value("statusReason", "");
  out += "\n";
  const int64_t stopped = job.value("stoppedAt", int64_t{0});
  if (stopped > 0 && r.created_at_ms > 0) {
    out += fmt::format("  submitted to done: {}\n", Seconds(stopped - r.created_at_ms));
  }

  // Training summary.
  std::optional<double> loss, val, tps, mfu;
  int64_t last_step = 0, val_step = 0;
  double tps_sum = 0, mfu_sum = 0;
  int rate_points = 0;
  for (const ProgressPoint& p : r.points) {
    last_step = std::max(last_step, p.step);
    if (p.loss) loss = p.loss;
    if (p.val_loss) {
      val = p.val_loss;
      val_step = p.step;
    }
    if (p.tokens_per_s) {
      tps = p.tokens_per_s;
      tps_sum += *p.tokens_per_s;
      ++rate_points;
    }
    if (p.mfu) {
      mfu = p.mfu;
      mfu_sum += *p.mfu;
    }
  }
  if (r.points.empty()) {
    out += "  training: no LOTE_PROGRESS lines in the main node's output\n";
  } else {
    out += fmt::format("  training: {} steps reported", last_step);
    if (loss) out += fmt::format(", final loss {:.4f}", *loss);
    if (val) out += fmt::format(", validation loss {:.4f} (step {})", *val, val_step);
    out += "\n";
    if (tps) {
      out += fmt::format("  throughput: {:.0f} tokens/s (mean of {} reports; last {:.0f})",
                         tps_sum / rate_points, rate_points, *tps);
      if (mfu)
        out += fmt::format(", MFU {:.1f}% (mean {:.1f}%)", 100 * *mfu, 100 * mfu_sum / rate_points);
      out += "\n";
    }
  }

  // Timeline.
  if (!r.nodes.empty()) {
    out += "  timeline (from submission):\n";
    out += fmt::format("    {:>7}  {:>4}  {:>10}  {:>10}  {:>10}  {:>10}  {}\n", "attempt", "node",
                       "queued", "starting", "running", "pull", "exit");
    for (const NodeSpan& n : r.nodes) {
      auto gap = [](int64_t from, int64_t to) {
        return from > 0 && to > 0 ? Seconds(to - from) : std::string("-");
      };
      std::string exit = n.exit_code ? std::to_string(*n.exit_code) : "-";
      if (!n.reason.empty()) exit += " (" + n.reason + ")";
      // The pull (container mode) is part of the running span.
      out +=
          fmt::format("    {:>7}  {:>4}  {:>10}  {:>10}  {:>10}  {:>10}  {}\n", n.attempt, n.node,
                      gap(r.created_at_ms, n.placed_at_ms), gap(n.placed_at_ms, n.started_at_ms),
                      gap(n.started_at_ms, n.stopped_at_ms),
                      gap(n.pull_started_at_ms, n.pull_stopped_at_ms), exit);
    }
  }

  // Checkpoints.
  if (!r.checkpoint_uri.empty()) {
    if (!r.checkpoint_problem.empty()) {
      out += "  checkpoints: " + r.checkpoint_uri + ": " + r.checkpoint_problem + "\n";
    } else {
      out += fmt::format("  checkpoints: {} in {}\n", r.checkpoints.size(), r.checkpoint_uri);
      for (const engine::CheckpointSummary& c : r.checkpoints) {
        out += fmt::format("    {:<12} {:>10}  {}  TP{} x DP{}\n", c.name,
                           engine::HumanBytes(static_cast<double>(c.total_bytes)),
                           c.complete ? "complete  " : "incomplete", c.tensor_parallel,
                           c.data_parallel);
      }
    }
  }
  return out;
}

std::string ProgressCsv(const JobReport& r) {
  std::string out = "step,attempt,loss,val_loss,lr,grad_norm,tokens_per_s,mfu\n";
  for (const ProgressPoint& p : r.points) {
    out +=
        fmt::format("{},{},{},{},{},{},{},{}\n", p.step, p.attempt, Cell(p.loss), Cell(p.val_loss),
                    Cell(p.lr), Cell(p.grad_norm), Cell(p.tokens_per_s), Cell(p.mfu));
  }
  return out;
}

Status PlotLossCurve(const JobReport& r, const std::string& png) {
  if (r.points.empty()) return Status::FailedPrecondition("no progress reported: nothing to plot");
  // The plot script: matplotlib, headless (Agg), reading the CSV on stdin.
  static constexpr const char* kScript = R"PY(
import csv, sys
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:
    sys.exit("matplotlib is missing for %s (%s): apt-get install python3-matplotlib"
             % (sys.executable, e))
rows = list(csv.DictReader(sys.stdin))
title, out = sys.argv[1], sys.argv[2]
def series(key):
    pts = [(int(r["step"]), float(r[key]), int(r["attempt"])) for r in rows if r[key]]
    return pts
fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
train = series("loss")
for attempt in sorted({a for _, _, a in train}):
    xs = [s for s, _, a in train if a == attempt]
    ys = [v for _, v, a in train if a == attempt]
    ax.plot(xs, ys, marker=".", label="training loss" + (f" (attempt {attempt})" if attempt > 1 else ""))
val = series("val_loss")
if val:
    ax.plot([s for s, _, _ in val], [v for _, v, _ in val], "s--", label="validation loss")
ax.set_xlabel("step")
ax.set_ylabel("cross-entropy loss")
ax.set_title(title)
ax.grid(True, alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(out)
)PY";
  const std::string title =
      "lote: " + r.job.value("jobName", std::string("job")) + " (" + r.job.value("jobId", "") + ")";
  const std::string csv = ProgressCsv(r);
  std::signal(SIGPIPE, SIG_IGN);  // python may exit before reading everything
  int in[2];
  if (pipe(in) != 0) return Status::Internal("pipe failed");
  pid_t pid = fork();
  if (pid < 0) return Status::Internal("fork failed");
  if (pid == 0) {
    dup2(in[0], 0);
    close(in[0]);
    close(in[1]);
    // Debian's python3 first: python3-matplotlib installs for it, while a
    // python3 earlier on PATH (a virtualenv, pyenv) may not have it.
    if (access("/usr/bin/python3", X_OK) == 0) {
      // argv[0] absolute: python derives its prefix (and sys.path) from it.
      execl("/usr/bin/python3", "/usr/bin/python3", "-c", kScript, title.c_str(), png.c_str(),
            nullptr);
    }
    execlp("python3", "python3", "-c", kScript, title.c_str(), png.c_str(), nullptr);
    _exit(127);
  }
  close(in[0]);
  size_t off = 0;
  while (off < csv.size()) {
    ssize_t n = write(in[1], csv.data() + off, csv.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  close(in[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return Status::FailedPrecondition("python3 is missing (apt-get install python3-matplotlib)");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::FailedPrecondition(
        "drawing the loss curve failed (python3-matplotlib installed? see the message above)");
  }
  return Status::Ok();
}

}  // namespace lote::workflow
