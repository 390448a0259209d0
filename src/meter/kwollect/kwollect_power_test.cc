// The Kwollect power source against the real server (kwatt serve --simulate's, started in the
// process on a port of 127.0.0.1 the kernel chose) with a monitoring job: 50 rows a second of the
// node's wattmeter. The truth is the simulator's exact energy of the node (what `kwatt simulate
// energy` prints). Live tests wait for rows in real time (a few seconds): the server's clock is
// the real one.
#include "kwatt/meter/kwollect/kwollect_power.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "kwatt/archive/writer.h"
#include "kwatt/backup/backup.h"
#include "kwatt/jobs/jobs_file.h"
#include "kwatt/kwollect/fetch.h"
#include "kwatt/meter/pipeline/meter.h"
#include "kwatt/meter/pipeline/replay.h"
#include "kwatt/server/server.h"
#include "kwatt/simulate/testbed.h"
#include "src/testing/manual_clock.h"
#include "src/testing/meter_sources.h"
#include "src/testing/temp_dir.h"

namespace kwatt::meter::kwollect_power_test {
namespace {

constexpr UnixNanos kS = kNanosPerSecond;

class KwollectPowerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    now_ = WallClockNow() / kS * kS;
    const int64_t t = now_ / kS;
    // nova-1 alternates 2 s idle and 3 s busy under a job monitoring its wattmeter (50 Hz); its
    // wattmeter port says nothing over [now - 25 s, now - 23 s).
    jobs_file_ = (dir_.root() / "jobs.json").string();
    std::ofstream(jobs_file_) << R"({"jobs": [{"site": "lyon", "uid": 7, "nodes": ["nova-1"],
        "started_at": )" << t - 40
                              << R"(, "stopped_at": )" << t + 600 << R"(,
        "types": ["monitor=wattmetre"], "repeat_phases": true,
        "phases": [{"name": "idle", "duration": 2, "cpu": 0}, {"name": "busy", "duration": 3, "cpu": 1}]}],
      "outages": [{"site": "lyon", "device": "wattmetre1-port7", "metric": "wattmetre_power_watt",
                   "start": )" << t - 25
                              << R"(, "end": )" << t - 23 << "}]}";
    server::ServerOptions options;
    options.jobs_file = jobs_file_;
    auto server = server::Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    auto jobs = jobs::JobSet::Load(jobs_file_);
    ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
    auto testbed = simulate::Testbed::Build({}, std::move(*jobs));
    ASSERT_TRUE(testbed.ok()) << testbed.status().ToString();
    testbed_ = std::move(*testbed);
    node_ = testbed_->FindNode(*testbed_->FindSite("lyon"), "nova-1");
    ASSERT_NE(node_, nullptr);
  }

  KwollectPowerOptions Options() const {
    KwollectPowerOptions options;
    options.node = "nova-1.lyon";
    options.client.api_url = server_->base_url();
    options.poll_period = std::chrono::milliseconds(300);
    options.max_delay = std::chrono::seconds(10);
    options.log = [](const std::string& line) { ADD_FAILURE() << "logged: " << line; };
    return options;
  }

  // The simulator's exact energy of nova-1 over [a, b] (kwatt simulate energy).
  double TrueJoules(UnixNanos a, UnixNanos b) const { return node_->model->EnergyJoules(a, b); }

  kwatt::testing::TempDir dir_{"kwollect_power"};
  UnixNanos now_ = 0;
  std::string jobs_file_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<simulate::Testbed> testbed_;
  const simulate::Node* node_ = nullptr;
};

// The energy over [a, b], which must be known already.
IntervalEnergy Known(DelayedEnergySource& source, UnixNanos a, UnixNanos b) {
  auto energy = source.EnergyBetween(a, b);
  EXPECT_TRUE(energy.ok()) << energy.status().ToString();
  if (!energy.ok() || !energy->has_value()) {
    ADD_FAILURE() << "not known yet: " << FormatUtcTimestamp(a) << " .. " << FormatUtcTimestamp(b);
    return {0, ~0u};
  }
  EXPECT_EQ((*energy)->size(), 1u);
  return (**energy)[0];
}

TEST_F(KwollectPowerTest, ConsecutiveIntervalsAddUpToTheTrueEnergy) {
  auto source = OpenKwollectPower(Options());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const Domain& domain = (*source)->domains().at(0);
  EXPECT_EQ(domain.source, "kwollect");
  EXPECT_EQ(domain.name, "nova-1.lyon.grid5000.fr");
  EXPECT_EQ(domain.kind, "node");
  EXPECT_EQ(domain.socket, -1);
  EXPECT_EQ(domain.origin,
            "wattmetre_power_watt of nova-1.lyon.grid5000.fr (" + server_->base_url() + ")");
  EXPECT_EQ((*source)->MaxDelay(), std::chrono::seconds(10));
  ASSERT_FALSE((*source)->Notes().empty());
  EXPECT_EQ((*source)->Notes()[0].rfind("nova-1.lyon.grid5000.fr: wattmetre_power_watt (external "
                                        "wattmeter",
                                        0),
            0u)
      << (*source)->Notes()[0];

  // 1-second intervals over 18 s after the outage, at their rows' 50 Hz: known at once.
  const UnixNanos a = now_ - 20 * kS, b = now_ - 2 * kS;
  int64_t sum = 0;
  double worst = 0;
  for (UnixNanos t = a; t < b; t += kS) {
    IntervalEnergy e = Known(**source, t, t + kS);
    EXPECT_EQ(e.flags, 0u) << FormatUtcTimestamp(t);
    // Each interval: the node's power (68 W idle, about 190 W busy) over one second.
    double truth = TrueJoules(t, t + kS);
    EXPECT_NEAR(e.microjoules / 1e6, truth, truth * 5e-3) << FormatUtcTimestamp(t);
    worst = std::max(worst, std::abs(e.microjoules / 1e6 - truth) / truth);
    sum += e.microjoules;
  }
  const double truth = TrueJoules(a, b);
  EXPECT_GT(truth, 18 * 60);
  RecordProperty("relative_error", std::to_string((sum / 1e6 - truth) / truth));
  RecordProperty("worst_interval_relative_error", std::to_string(worst));
  EXPECT_NEAR(sum / 1e6, truth, truth * 1e-3);
  // The whole at once is the sum of its parts (to the microjoule each part was rounded to).
  EXPECT_NEAR(double(Known(**source, a, b).microjoules), double(sum), 18);
}

TEST_F(KwollectPowerTest, AnIntervalIsUnknownUntilTheApiHasItsRows) {
  auto source = OpenKwollectPower(Options());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const UnixNanos a = WallClockNow() + kS, b = a + kS;
  auto early = (*source)->EnergyBetween(a, b);
  ASSERT_TRUE(early.ok());
  EXPECT_FALSE(early->has_value());  // its instant has not even come
  // The server has the rows from `b` on; the source's polls bring them (deadline: generous).
  std::optional<std::vector<IntervalEnergy>> energy;
  for (int i = 0; i < 200 && !energy; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto answer = (*source)->EnergyBetween(a, b);
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    energy = *answer;
  }
  ASSERT_TRUE(energy.has_value()) << "no rows 20 s after the interval";
  EXPECT_LE(b, WallClockNow());  // not before the end of the interval
  EXPECT_EQ((*energy)[0].flags, 0u);
  const double truth = TrueJoules(a, b);
  EXPECT_NEAR((*energy)[0].microjoules / 1e6, truth, truth * 5e-3);
  KwollectPowerSource::Stats stats = (*source)->stats();
  EXPECT_GE(stats.polls, 1);
  EXPECT_EQ(stats.failed_polls, 0);
  EXPECT_GT(stats.rows, 50 * 10);
  // The simulator serves a row once its instant passed: the newest row is a sampling period
  // (20 ms) behind the poll's instant, give or take the request's time.
  RecordProperty("max_lag_seconds", std::to_string(stats.max_lag_seconds));
  EXPECT_GE(stats.lag_seconds, 0);
  EXPECT_LT(stats.max_lag_seconds, 1);
}

TEST_F(KwollectPowerTest, AStretchWithoutRowsIsFlagged) {
  auto source = OpenKwollectPower(Options());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  // Inside the wattmeter's outage: nothing covered.
  IntervalEnergy inside = Known(**source, now_ - 24 * kS - kS / 2, now_ - 23 * kS - kS / 2);
  EXPECT_EQ(inside.flags, uint32_t(kUnreadable));
  EXPECT_EQ(inside.microjoules, 0);
  // Across it: flagged, with the energy of the two covered seconds around it (to a sampling
  // period at each edge of the gap).
  IntervalEnergy across = Known(**source, now_ - 26 * kS, now_ - 22 * kS);
  EXPECT_EQ(across.flags, uint32_t(kUnreadable));
  const double covered =
      TrueJoules(now_ - 26 * kS, now_ - 25 * kS) + TrueJoules(now_ - 23 * kS, now_ - 22 * kS);
  EXPECT_NEAR(across.microjoules / 1e6, covered, 2 * 0.02 * 250 + covered * 5e-3);
  // Right after it: known and whole again.
  EXPECT_EQ(Known(**source, now_ - 22 * kS, now_ - 21 * kS).flags, 0u);
}

TEST_F(KwollectPowerTest, AnArchiveGivesTheEnergiesTheLiveSourceGives) {
  kwollect::ClientOptions client;
  client.api_url = server_->base_url();
  kwollect::FetchQuery query;
  query.nodes = {NodeName{"nova-1", "lyon"}};
  query.start = now_ - 35 * kS;
  query.end = now_ - 1 * kS;
  const std::string archive_dir = (dir_.root() / "backup").string();
  auto backup = backup::Backup(client, query, archive_dir, "test");
  ASSERT_TRUE(backup.ok()) << backup.status().ToString();
  ASSERT_TRUE(backup->finished.ok()) << backup->finished.ToString();

  auto archived = OpenArchivePower(archive_dir, "nova-1.lyon.grid5000.fr");
  ASSERT_TRUE(archived.ok()) << archived.status().ToString();
  auto live = OpenKwollectPower(Options());
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_EQ((*archived)->domains()[0].name, "nova-1.lyon.grid5000.fr");
  EXPECT_EQ((*archived)->domains()[0].origin,
            "wattmetre_power_watt of nova-1.lyon.grid5000.fr (archive " + archive_dir + ")");
  EXPECT_EQ((*archived)->MaxDelay(), std::chrono::nanoseconds(0));
  // Over the same rows, the same integration: the same microjoules and flags, the outage's
  // intervals included.
  int flagged = 0;
  for (UnixNanos t = now_ - 30 * kS; t < now_ - 5 * kS; t += kS / 2) {
    IntervalEnergy from_archive = Known(**archived, t, t + kS / 2);
    IntervalEnergy from_live = Known(**live, t, t + kS / 2);
    EXPECT_EQ(from_archive.microjoules, from_live.microjoules) << FormatUtcTimestamp(t);
    EXPECT_EQ(from_archive.flags, from_live.flags) << FormatUtcTimestamp(t);
    flagged += from_archive.flags != 0;
  }
  EXPECT_EQ(flagged, 5);  // the 2 s of the outage and the half-seconds at its edges
  // Past the archive's end: never "not yet", a gap.
  IntervalEnergy after = Known(**archived, now_, now_ + kS);
  EXPECT_EQ(after.flags, uint32_t(kUnreadable));
  EXPECT_EQ(after.microjoules, 0);

  auto other = OpenArchivePower(archive_dir, "nova-2.lyon");
  EXPECT_EQ(other.status().code(), Status::Code::kNotFound);
  EXPECT_NE(other.status().message().find("holds no node nova-2.lyon.grid5000.fr (it holds "
                                          "nova-1.lyon.grid5000.fr)"),
            std::string::npos)
      << other.status().message();
}

TEST_F(KwollectPowerTest, TheMeterReportsTheNodesEnergyOnceKnown) {
  // The whole pipeline with the node's power as its only source: each interval's report waits
  // for the rows, then carries the node's energy.
  auto source = OpenKwollectPower(Options());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::vector<std::unique_ptr<DelayedEnergySource>> delayed;
  delayed.push_back(std::move(*source));
  auto buffer = std::make_unique<ReportBuffer>();
  ReportBuffer* reports = buffer.get();
  std::vector<MeterOutput> outputs;
  outputs.push_back({"buffer", std::move(buffer)});
  MeterOptions options;
  options.period = std::chrono::milliseconds(500);
  options.duration = std::chrono::seconds(2);
  auto meter = Meter::Create(MeterEnvironment(), {}, std::move(delayed), nullptr,
                             std::move(outputs), options);
  ASSERT_TRUE(meter.ok()) << meter.status().ToString();
  ASSERT_TRUE((*meter)->Start().ok());
  ASSERT_TRUE((*meter)->Wait().ok());
  std::vector<IntervalReport> all = reports->Take();
  ASSERT_GE(all.size(), 4u);
  for (const IntervalReport& r : all) {
    ASSERT_EQ(r.domains.size(), 1u);
    EXPECT_EQ(r.domains[0].flags, 0u);
    const double truth = TrueJoules(r.start, r.end);
    EXPECT_NEAR(r.domains[0].measured_microjoules / 1e6, truth, 0.5 + truth * 1e-2)
        << FormatUtcTimestamp(r.start) << " .. " << FormatUtcTimestamp(r.end);
  }
}

TEST_F(KwollectPowerTest, BadOptionsAndUnknownNodesAreNamed) {
  KwollectPowerOptions options = Options();
  options.node = "nova-99.lyon";
  auto source = OpenKwollectPower(options);
  EXPECT_EQ(source.status().code(), Status::Code::kNotFound);
  EXPECT_NE(source.status().message().find("nova-99"), std::string::npos);

  options = Options();
  options.metric = "prom_node_load1";
  source = OpenKwollectPower(options);
  EXPECT_EQ(source.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(source.status().message().find("not a power metric"), std::string::npos);

  options = Options();
  options.retention = std::chrono::seconds(5);
  source = OpenKwollectPower(options);
  EXPECT_EQ(source.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(source.status().message().find("retention"), std::string::npos);

  options = Options();
  options.poll_period = std::chrono::nanoseconds(0);
  EXPECT_EQ(OpenKwollectPower(options).status().code(), Status::Code::kInvalidArgument);

  // Rows at hand without the node's power: none to choose, named.
  energy::PowerCollector empty({"nova-1.lyon.grid5000.fr"});
  auto collected = CollectedPower(empty, "nova-1.lyon.grid5000.fr", now_ - kS, now_);
  EXPECT_EQ(collected.status().code(), Status::Code::kNotFound);
  EXPECT_NE(collected.status().message().find("has no power"), std::string::npos)
      << collected.status().message();
}

TEST_F(KwollectPowerTest, RefusedCredentialsAndAnUnreachableApiAreErrors) {
  server::ServerOptions guarded;
  guarded.jobs_file = jobs_file_;
  guarded.auth = "alice:secret";
  auto server = server::Server::Start(guarded);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  KwollectPowerOptions options = Options();
  options.client.api_url = (*server)->base_url();
  options.client.username = "alice";
  options.client.password = "wrong";
  auto source = OpenKwollectPower(options);
  EXPECT_EQ(source.status().code(), Status::Code::kUnauthenticated) << source.status().ToString();
  EXPECT_EQ(source.status().message().find("wrong"), std::string::npos);  // never the password
  options.client.password = "secret";
  source = OpenKwollectPower(options);
  EXPECT_TRUE(source.ok()) << source.status().ToString();

  const std::string url = (*server)->base_url();
  source = Status::Internal("closed");
  (*server)->Stop();
  options.client.api_url = url;
  options.client.max_retries = 0;
  source = OpenKwollectPower(options);
  EXPECT_EQ(source.status().code(), Status::Code::kUnavailable) << source.status().ToString();
}

TEST_F(KwollectPowerTest, FetchResolvedAsksOnlyForTheRows) {
  // What each poll does: the node resolved once, then one metrics request per fetch.
  kwollect::ClientOptions client;
  client.api_url = server_->base_url();
  kwollect::FetchQuery query;
  query.nodes = {NodeName{"nova-1", "lyon"}};
  query.start = now_ - 10 * kS;
  query.end = now_ - 9 * kS;
  query.metrics = {"wattmetre_power_watt"};
  auto resolved = kwollect::Resolve(client, query);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  energy::PowerCollector rows({"nova-1.lyon.grid5000.fr"});
  auto report = kwollect::FetchResolved(client, query, *resolved, &rows);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->requests, 1);
  EXPECT_EQ(report->rows, 51);  // 50 Hz, both bounds included
  // A node the resolution did not cover is refused, not fetched blind.
  query.nodes = {NodeName{"gros-1", "nancy"}};
  report = kwollect::FetchResolved(client, query, *resolved, &rows);
  EXPECT_EQ(report.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(report.status().message().find("gros-1.nancy was not resolved"), std::string::npos);
}

TEST_F(KwollectPowerTest, PollsSurviveAnOutageOfTheApiButNotRefusedCredentials) {
  KwollectPowerOptions options = Options();
  options.client.max_retries = 0;
  std::mutex mutex;
  std::vector<std::string> logged;
  options.log = [&](const std::string& line) {
    std::lock_guard lock(mutex);
    logged.push_back(line);
  };
  auto source = OpenKwollectPower(options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const int port = server_->port();
  auto restart = [&](const std::string& auth) {
    server::ServerOptions again;
    again.port = port;  // the port the source knows, the kernel's choice of SetUp
    again.jobs_file = jobs_file_;
    again.auth = auth;
    auto started = server::Server::Start(again);
    if (started.ok()) server_ = std::move(*started);
    return started.status();
  };
  auto wait_for = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 200 && !done(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return done();
  };

  // The API goes away: polls fail, are logged once, and an interval stays unknown, not an error.
  server_->Stop();
  ASSERT_TRUE(wait_for([&] { return (*source)->stats().failed_polls >= 2; }));
  const UnixNanos a = WallClockNow(), b = a + kS / 2;
  auto pending = (*source)->EnergyBetween(a, b);
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  EXPECT_FALSE(pending->has_value());
  {
    std::lock_guard lock(mutex);
    ASSERT_EQ(logged.size(), 1u);
    EXPECT_NE(logged[0].find("polling Kwollect for nova-1.lyon.grid5000.fr failed, retrying every "
                             "0.3 s"),
              std::string::npos)
        << logged[0];
  }
  EXPECT_FALSE((*source)->stats().last_error.empty());

  // It comes back: the rows missed meanwhile are fetched, the interval is known.
  Status restarted = restart("");
  if (!restarted.ok())
    GTEST_SKIP() << "port " << port << " was taken meanwhile: " << restarted.ToString();
  ASSERT_TRUE(wait_for([&] {
    auto e = (*source)->EnergyBetween(a, b);
    return e.ok() && e->has_value();
  }));
  IntervalEnergy e = Known(**source, a, b);
  EXPECT_EQ(e.flags, 0u);
  EXPECT_NEAR(e.microjoules / 1e6, TrueJoules(a, b), TrueJoules(a, b) * 1e-2);

  // Credentials refused: the source has failed as a whole, and says so.
  server_->Stop();
  restarted = restart("bob:other");
  if (!restarted.ok())
    GTEST_SKIP() << "port " << port << " was taken meanwhile: " << restarted.ToString();
  ASSERT_TRUE(wait_for([&] { return !(*source)->EnergyBetween(a, b).ok(); }));
  auto refused = (*source)->EnergyBetween(a, b);
  EXPECT_EQ(refused.status().code(), Status::Code::kUnauthenticated) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("Kwollect power of nova-1.lyon.grid5000.fr"),
            std::string::npos);
  std::lock_guard lock(mutex);
  EXPECT_NE(logged.back().find("(no more polls)"), std::string::npos) << logged.back();
}

TEST_F(KwollectPowerTest, ClosingDoesNotWaitForAHangingApi) {
  auto source = OpenKwollectPower(Options());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  // The API now takes 4 s to answer anything: a poll is waiting for it.
  const int port = server_->port();
  server_->Stop();
  server::ServerOptions slow;
  slow.port = port;
  slow.jobs_file = jobs_file_;
  slow.latency_ms = 4'000;
  auto started = server::Server::Start(slow);
  if (!started.ok()) GTEST_SKIP() << "port " << port << " was taken meanwhile";
  server_ = std::move(*started);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // past a poll period: a poll is waiting
  const auto before = std::chrono::steady_clock::now();
  source->reset();
  // Closed without waiting for the answer, which comes 4 s after the poll started (within 0.3 s
  // of the restart), so 3 s or more after this: a functional bound, not a speed test.
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(2500));
}

TEST_F(KwollectPowerTest, ATwoPsuNodesOutletsAreSummed) {
  // nantes/ecotype: no wattmeter, one PDU outlet per PSU (two series, by their `_info` label),
  // at 1 s: the choice falls to the outlets, and the node's power is their sum.
  KwollectPowerOptions options = Options();
  options.node = "ecotype-7.nantes";
  auto source = OpenKwollectPower(options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->domains()[0].origin.rfind("pdu_outlet_power_watt of ecotype-7", 0), 0u)
      << (*source)->domains()[0].origin;
  const simulate::Node* ecotype = testbed_->FindNode(*testbed_->FindSite("nantes"), "ecotype-7");
  ASSERT_NE(ecotype, nullptr);
  const UnixNanos a = now_ - 40 * kS, b = now_ - 5 * kS;
  IntervalEnergy e = Known(**source, a, b);
  EXPECT_EQ(e.flags, 0u);
  const double truth = ecotype->model->EnergyJoules(a, b);
  // Each outlet reads its share to the watt, with a watt of noise: within 2 % over 35 s.
  EXPECT_NEAR(e.microjoules / 1e6, truth, truth * 2e-2);
  RecordProperty("relative_error", std::to_string((e.microjoules / 1e6 - truth) / truth));
}

TEST_F(KwollectPowerTest, ARecordedExperimentSharesItsArchivedWattmeterEnergy) {
  // After the fact, as `kwatt energy ARCHIVE --activity FILE` does: an activity recorded over
  // [now - 20 s, now - 10 s] (on a manual clock set there), the wattmeter's rows in an archive.
  auto clock = std::make_shared<ManualClock>(0, now_ - 20 * kS);
  const std::string record_path = (dir_.root() / "activity.jsonl").string();
  Status recorded = testing::RecordRateActivity(record_path, clock, dir_.root().string(), 10,
                                                std::chrono::seconds(1));
  ASSERT_TRUE(recorded.ok()) << recorded.ToString();
  kwollect::ClientOptions client;
  client.api_url = server_->base_url();
  kwollect::FetchQuery query;
  query.nodes = {NodeName{"nova-1", "lyon"}};
  query.start = now_ - 35 * kS;
  query.end = now_ - 1 * kS;
  const std::string archive_dir = (dir_.root() / "backup").string();
  auto backup = backup::Backup(client, query, archive_dir, "test");
  ASSERT_TRUE(backup.ok() && backup->finished.ok()) << backup.status().ToString();
  auto wattmeter = OpenArchivePower(archive_dir, "nova-1.lyon");
  ASSERT_TRUE(wattmeter.ok()) << wattmeter.status().ToString();

  auto record = ActivityRecordReader::Open(record_path);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  ReplayOptions options;
  options.idle_policy = IdlePolicy::kNone;
  options.idle_watts = {{"node", 40.0}};
  auto replayed = ReplayActivity(**record, **wattmeter, options);
  ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
  EXPECT_EQ(replayed->intervals, 10);
  EXPECT_EQ(replayed->gap_intervals, 0);
  const MeterTotals& totals = replayed->totals;
  ASSERT_EQ(totals.domains.size(), 1u);
  EXPECT_EQ(totals.domains[0].name, "nova-1.lyon.grid5000.fr");
  // The node's energy over the record, within the wattmeter's noise of the truth, and shared
  // exactly: measured = idle + unattributed + the targets' shares.
  const double truth = TrueJoules(now_ - 20 * kS, now_ - 10 * kS);
  EXPECT_NEAR(totals.measured_microjoules[0] / 1e6, truth, truth * 1e-3);
  int64_t shared = totals.idle_microjoules[0] + totals.unattributed_microjoules[0];
  for (const auto& target : totals.targets) shared += target.microjoules[0];
  EXPECT_EQ(shared, totals.measured_microjoules[0]);
  ASSERT_EQ(totals.targets.size(), 2u);
  EXPECT_GT(totals.targets[0].microjoules[0], totals.targets[1].microjoules[0]);
}

}  // namespace
}  // namespace kwatt::meter::kwollect_power_test
