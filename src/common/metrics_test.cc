#include "common/metrics.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <thread>

namespace lote::metrics {
namespace {

// Every line is a comment (# HELP / # TYPE) or `name{labels} value`.
void ExpectWellFormed(const std::string& text) {
  static const std::regex kSample(
      R"re(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? [-+0-9.eEInfNa]+$)re");
  static const std::regex kComment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$)");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    EXPECT_TRUE(std::regex_match(line, kSample) || std::regex_match(line, kComment)) << line;
  }
}

TEST(MetricsTest, CountersAndGaugesByLabels) {
  Registry r;
  Counter* a =
      r.GetCounter("lote_launches_total", "Gangs handed to a backend.", {{"backend", "local"}});
  Counter* b =
      r.GetCounter("lote_launches_total", "Gangs handed to a backend.", {{"backend", "slurm"}});
  EXPECT_EQ(a, r.GetCounter("lote_launches_total", "", {{"backend", "local"}}));
  a->Add();
  a->Add(2);
  b->Add();
  Gauge* g = r.GetGauge("lote_loop_pending", "Pending work.");
  g->Set(7);
  g->Add(-2);
  const std::string text = r.Render();
  ExpectWellFormed(text);
  EXPECT_NE(text.find("# TYPE lote_launches_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lote_launches_total{backend=\"local\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lote_launches_total{backend=\"slurm\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lote_loop_pending 5\n"), std::string::npos) << text;
  // Families in name order.
  EXPECT_LT(text.find("lote_launches_total"), text.find("lote_loop_pending"));
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Registry r;
  Histogram* h = r.GetHistogram("lote_submit_seconds", "SubmitJob latency.", {0.001, 0.01, 0.1});
  for (double v : {0.0005, 0.001, 0.002, 0.05, 0.5, 2.0}) h->Observe(v);
  EXPECT_EQ(h->count(), 6u);
  EXPECT_NEAR(h->sum(), 2.5535, 1e-6);
  const std::string text = r.Render();
  ExpectWellFormed(text);
  EXPECT_NE(text.find("lote_submit_seconds_bucket{le=\"0.001\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lote_submit_seconds_bucket{le=\"0.01\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lote_submit_seconds_bucket{le=\"0.1\"} 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lote_submit_seconds_bucket{le=\"+Inf\"} 6\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lote_submit_seconds_count 6\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lote_submit_seconds_sum 2.5535\n"), std::string::npos) << text;
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  Registry r;
  r.GetCounter("lote_x_total", "help with \\ and\nnewline", {{"queue", "a\"b\\c\nd"}})->Add();
  const std::string text = r.Render();
  ExpectWellFormed(text);
  EXPECT_NE(text.find(R"(lote_x_total{queue="a\"b\\c\nd"} 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP lote_x_total help with \\\\ and\\nnewline\n"), std::string::npos)
      << text;
}

TEST(MetricsTest, CollectorsAreAskedAtEachRender) {
  Registry r;
  int calls = 0;
  r.AddCollector("lote_jobs", "Jobs by queue and status.", [&] {
    ++calls;
    return std::vector<std::pair<Labels, double>>{
        {{{"queue", "q1"}, {"status", "RUNNABLE"}}, 100000},
        {{{"queue", "q1"}, {"status", "RUNNING"}}, static_cast<double>(calls)}};
  });
  std::string first = r.Render();
  std::string second = r.Render();
  ExpectWellFormed(second);
  EXPECT_EQ(calls, 2);
  EXPECT_NE(second.find("lote_jobs{queue=\"q1\",status=\"RUNNABLE\"} 100000\n"), std::string::npos)
      << second;
  EXPECT_NE(first.find("lote_jobs{queue=\"q1\",status=\"RUNNING\"} 1\n"), std::string::npos)
      << first;
  EXPECT_NE(second.find("lote_jobs{queue=\"q1\",status=\"RUNNING\"} 2\n"), std::string::npos)
      << second;
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  Registry r;
  Counter* c = r.GetCounter("lote_c_total", "c");
  Histogram* h = r.GetHistogram("lote_h_seconds", "h", LatencyBuckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c->Add();
        h->Observe(0.003);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->value(), 40000u);
  EXPECT_EQ(h->count(), 40000u);
  EXPECT_NEAR(h->sum(), 120.0, 1e-6);
}

}  // namespace
}  // namespace lote::metrics
