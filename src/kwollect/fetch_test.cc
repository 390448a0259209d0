// The fetcher (retry, split, re-plan, ordered delivery, merged failures) over a scripted
// transport: no network, every answer chosen by the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "kwatt/core/time.h"
#include "kwatt/http/transport.h"
#include "src/kwollect/fetcher.h"

namespace kwatt::kwollect::internal::fetch_test {
namespace {

using http::BodySink;
using http::TransferOutcome;
using http::Transport;

constexpr UnixNanos kT0 = 1744977600LL * kNanosPerSecond;  // 2025-04-18T12:00:00Z

// What the fetcher asked for.
struct FakeRequest {
  std::string site;
  std::vector<std::string> nodes, metrics;
  UnixNanos start = 0, end = 0;
};

// What the scripted server answers.
struct FakeAnswer {
  long status = 200;
  std::string body;  // for a 200: empty means "the rows of the request" (RowsOf)
  bool cut = false;  // the connection drops in the middle of the body
  int64_t retry_after_s = -1;
};

std::string UrlDecode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      out.push_back(char(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// Metric ids of a request for "every metric".
const std::vector<std::string> kAllMetrics = {"m1", "m2", "m3"};

// One row per node, metric and whole second of the request, in time order as Kwollect sends.
std::string RowsOf(const FakeRequest& r) {
  const std::vector<std::string>& metrics = r.metrics.empty() ? kAllMetrics : r.metrics;
  std::string body = "[";
  UnixNanos first = (r.start + kNanosPerSecond - 1) / kNanosPerSecond * kNanosPerSecond;
  for (UnixNanos t = first; t <= r.end; t += kNanosPerSecond) {
    for (const std::string& node : r.nodes) {
      for (const std::string& metric : metrics) {
        if (body.size() > 1) body += ",\n";
        body += R"({"timestamp":")" + FormatParisTimestamp(t) + R"(","device_id":")" + node +
                R"(","metric_id":")" + metric + R"(","value":1,"labels":{}})";
      }
    }
  }
  return body + "]";
}

class FakeTransport : public Transport {
 public:
  std::function<FakeAnswer(const FakeRequest&)> answer = [](const FakeRequest&) {
    return FakeAnswer();
  };
  bool reverse = false;  // finish the transfers of one Poll last started first
  std::vector<FakeRequest> log;
  size_t most_in_flight = 0;

  int64_t Start(const std::string& url, BodySink body) override {
    FakeRequest request;
    size_t sites = url.find("/sites/") + 7;
    request.site = url.substr(sites, url.find('/', sites) - sites);
    std::string query = url.substr(url.find('?') + 1);
    for (const std::string& pair : SplitList(query, '&')) {
      std::string key = pair.substr(0, pair.find('='));
      std::string value = UrlDecode(pair.substr(pair.find('=') + 1));
      if (key == "nodes") request.nodes = SplitList(value, ',');
      if (key == "metrics") request.metrics = SplitList(value, ',');
      if (key == "start_time") request.start = *ParseKwollectTimeParameter(value);
      if (key == "end_time") request.end = *ParseKwollectTimeParameter(value);
    }
    log.push_back(request);
    in_flight_.push_back({++last_id_, request, std::move(body)});
    most_in_flight = std::max(most_in_flight, in_flight_.size());
    return last_id_;
  }

  void Poll(int, std::vector<TransferOutcome>* done) override {
    std::vector<InFlight> finishing = std::move(in_flight_);
    in_flight_.clear();
    if (reverse) std::reverse(finishing.begin(), finishing.end());
    for (InFlight& transfer : finishing) {
      FakeAnswer answer = this->answer(transfer.request);
      TransferOutcome outcome;
      outcome.id = transfer.id;
      outcome.response.status = answer.status;
      outcome.response.retry_after_s = answer.retry_after_s;
      std::string body =
          answer.status == 200 && answer.body.empty() ? RowsOf(transfer.request) : answer.body;
      if (answer.cut) body.resize(body.size() / 2);
      outcome.body_bytes = int64_t(body.size());
      if (answer.status == 200) {
        // In two pieces, as a network would.
        for (std::string_view piece : {std::string_view(body).substr(0, body.size() / 3),
                                       std::string_view(body).substr(body.size() / 3)}) {
          Status fed = transfer.body(piece);
          if (!fed.ok()) {
            outcome.transport = fed;
            break;
          }
        }
      } else {
        outcome.response.body = body;
      }
      if (answer.cut && outcome.transport.ok()) {
        outcome.transport = Status::Unavailable("connection cut");
      }
      done->push_back(std::move(outcome));
    }
  }

 private:
  struct InFlight {
    int64_t id;
    FakeRequest request;
    BodySink body;
  };
  static std::vector<std::string> SplitList(const std::string& text, char separator) {
    std::vector<std::string> out;
    size_t begin = 0;
    while (begin <= text.size()) {
      size_t end = text.find(separator, begin);
      if (end == std::string::npos) end = text.size();
      if (end > begin) out.push_back(text.substr(begin, end - begin));
      begin = end + 1;
    }
    return out;
  }
  std::vector<InFlight> in_flight_;
  int64_t last_id_ = 0;
};

// (site, node, metric, time) of every row, in the order the sink received them.
using Row = std::tuple<std::string, std::string, std::string, UnixNanos>;

class CollectingSink : public RowSink {
 public:
  std::vector<Row> rows;
  std::vector<MissingPiece> failed;
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override {
    for (size_t i = 0; i < batch.size(); ++i) {
      rows.emplace_back(std::string(site), std::string(interner.Get(batch.device[i])),
                        std::string(interner.Get(batch.metric[i])), batch.time[i]);
    }
    return Status::OK();
  }
  Status Failed(const MissingPiece& failure) override {
    failed.push_back(failure);
    return Status::OK();
  }
};

SitePlanInput Site(const std::string& site, const std::vector<std::string>& uids, double rate) {
  SitePlanInput input{site, uids, {}, {}};
  for (const std::string& uid : uids) {
    input.rates.push_back({uid, rate});
    input.metric_ids[uid] = kAllMetrics;
  }
  return input;
}

struct Outcome {
  Status status;
  RowsReport report;
};

Outcome FetchWith(FakeTransport* transport, CollectingSink* sink, std::vector<SitePlanInput> inputs,
                  UnixNanos start, UnixNanos end, ClientOptions options = ClientOptions(),
                  int64_t margin = 0) {
  options.api_url = "http://fake/stable";
  options.backoff_s = 0;
  FetchQuery query;
  query.margin = margin;
  Outcome run;
  run.report.start = start;
  run.report.end = end;
  run.status = RunFetcher(options, query, std::move(inputs), transport, sink, {}, &run.report);
  return run;
}

// Every row of `nodes` over [start, end] as the fake has them.
std::set<Row> Expected(const std::string& site, const std::vector<std::string>& nodes,
                       UnixNanos start, UnixNanos end) {
  std::set<Row> rows;
  for (UnixNanos t = start; t <= end; t += kNanosPerSecond) {
    for (const std::string& node : nodes) {
      for (const std::string& metric : kAllMetrics) rows.emplace(site, node, metric, t);
    }
  }
  return rows;
}

TEST(Fetcher, DeliversSitesInOrderAndEachNodeChronologicallyWhateverTheAnswerOrder) {
  FakeTransport transport;
  transport.reverse = true;
  CollectingSink sink;
  ClientOptions options;
  options.max_rows_per_request = 100;  // 3 rows a second and node: many requests
  UnixNanos end = kT0 + 600 * kNanosPerSecond;
  Outcome run =
      FetchWith(&transport, &sink, {Site("lyon", {"a-1", "a-2"}, 3), Site("nancy", {"b-1"}, 3)},
                kT0, end, options);
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  EXPECT_TRUE(run.report.complete());
  EXPECT_GT(transport.log.size(), 20u);
  std::set<Row> expected = Expected("lyon", {"a-1", "a-2"}, kT0, end);
  std::set<Row> nancy = Expected("nancy", {"b-1"}, kT0, end);
  expected.insert(nancy.begin(), nancy.end());
  EXPECT_EQ(std::set<Row>(sink.rows.begin(), sink.rows.end()), expected);
  EXPECT_EQ(sink.rows.size(), expected.size());  // none twice
  // Lyon first, then Nancy; each node's rows in time order.
  auto first_nancy = std::find_if(sink.rows.begin(), sink.rows.end(),
                                  [](const Row& r) { return std::get<0>(r) == "nancy"; });
  EXPECT_TRUE(std::all_of(first_nancy, sink.rows.end(),
                          [](const Row& r) { return std::get<0>(r) == "nancy"; }));
  std::map<std::string, UnixNanos> last;
  for (const Row& row : sink.rows) {
    UnixNanos& previous = last[std::get<1>(row)];
    EXPECT_LE(previous, std::get<3>(row));
    previous = std::get<3>(row);
  }
  EXPECT_EQ(run.report.rows, int64_t(expected.size()));
}

TEST(Fetcher, AMarginReadsRowsBeyondTheWindowWhichTheReportKeepsAsAsked) {
  FakeTransport transport;
  CollectingSink sink;
  UnixNanos end = kT0 + 60 * kNanosPerSecond;
  const int64_t margin = 15 * kNanosPerSecond;
  Outcome run =
      FetchWith(&transport, &sink, {Site("lyon", {"a-1"}, 3)}, kT0, end, ClientOptions(), margin);
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  std::set<Row> expected = Expected("lyon", {"a-1"}, kT0 - margin, end + margin);
  EXPECT_EQ(std::set<Row>(sink.rows.begin(), sink.rows.end()), expected);
  EXPECT_EQ(run.report.start, kT0);
  EXPECT_EQ(run.report.end, end);
}

TEST(Fetcher, RetriesTransientFailuresThenGetsEverything) {
  FakeTransport transport;
  std::map<std::tuple<std::string, UnixNanos>, int> seen;
  transport.answer = [&](const FakeRequest& r) {
    int n = seen[{r.nodes.front(), r.start}]++;
    FakeAnswer answer;
    if (n == 0) answer.status = 503;               // a proxy
    if (n == 1) answer.cut = true;                 // a body cut midway
    if (n == 2) answer.body = "[{\"timestamp\":";  // an answer that ends too soon
    return answer;
  };
  CollectingSink sink;
  UnixNanos end = kT0 + 60 * kNanosPerSecond;
  Outcome run = FetchWith(&transport, &sink, {Site("lyon", {"a-1"}, 3)}, kT0, end);
  ASSERT_TRUE(run.status.ok());
  EXPECT_TRUE(run.report.complete());
  EXPECT_EQ(run.report.retries, 3);
  EXPECT_EQ(run.report.requests, 4);
  EXPECT_EQ(std::set<Row>(sink.rows.begin(), sink.rows.end()), Expected("lyon", {"a-1"}, kT0, end));
}

TEST(Fetcher, APersistentHtml500IsRetriedNeverSplitAndReportedOnce) {
  FakeTransport transport;
  transport.answer = [](const FakeRequest&) {
    return FakeAnswer{500, "<html><body><h1>500 Internal Server Error</h1></body></html>"};
  };
  CollectingSink sink;
  ClientOptions options;
  options.max_retries = 2;
  options.max_rows_per_request = 300;
  UnixNanos end = kT0 + 3600 * kNanosPerSecond;
  Outcome run = FetchWith(&transport, &sink, {Site("lyon", {"a-1", "a-2"}, 3)}, kT0, end, options);
  ASSERT_TRUE(run.status.ok());
  EXPECT_EQ(run.report.splits, 0);
  int64_t planned = run.report.requests / 3;
  EXPECT_GT(planned, 10);
  EXPECT_EQ(run.report.requests, 3 * planned);  // each planned request: 1 + 2 retries
  ASSERT_EQ(run.report.failures.size(), 1u);
  const MissingPiece& failure = run.report.failures[0];
  EXPECT_EQ(failure.start, kT0);
  EXPECT_EQ(failure.end, end);
  EXPECT_EQ(failure.nodes, (std::vector<std::string>{"a-1", "a-2"}));
  EXPECT_NE(failure.error.message().find("Internal Server Error"), std::string::npos);
  // The sink was told of each piece where its rows would have been.
  EXPECT_EQ(int64_t(sink.failed.size()), planned);
}

FakeAnswer TooMuchOver(const FakeRequest& r, size_t limit) {
  std::string rows = RowsOf(r);
  size_t count = rows == "[]" ? 0 : size_t(std::count(rows.begin(), rows.end(), '\n')) + 1;
  if (count <= limit) return FakeAnswer{200, rows};
  return FakeAnswer{500, R"({"hint":null,"details":null,"code":"P0001",)"
                         R"("message":"Request timeout, too much data to process."})"};
}

TEST(Fetcher, KwollectsTimeoutSplitsByTimeThenByCatalogueMetric) {
  // 2 nodes x 3 metrics a second; at most 2 rows a request: only one metric of one node over a
  // second fits, so the fetcher must split by time, nodes, then metrics from the catalogue.
  FakeTransport transport;
  transport.answer = [](const FakeRequest& r) { return TooMuchOver(r, 2); };
  CollectingSink sink;
  UnixNanos end = kT0 + 8 * kNanosPerSecond - kNanosPerMicro;  // 8 s: 8 rows a node and metric
  Outcome run = FetchWith(&transport, &sink, {Site("lyon", {"a-1", "a-2"}, 0.01)}, kT0, end);
  ASSERT_TRUE(run.status.ok());
  EXPECT_TRUE(run.report.complete()) << run.report.failures[0].error.ToString();
  EXPECT_EQ(std::set<Row>(sink.rows.begin(), sink.rows.end()),
            Expected("lyon", {"a-1", "a-2"}, kT0, kT0 + 7 * kNanosPerSecond));
  for (const FakeRequest& r : transport.log) {
    EXPECT_GE(r.end - r.start + kNanosPerMicro, kMinSplitNs / 2);  // never a sub-second slice
  }
  EXPECT_LT(transport.log.size(), 200u);
}

TEST(Fetcher, WhatNoSplitCanFetchIsOneMergedFailure) {
  // Metric m2 alone over a second is too much (3 rows of it a second), the others fit.
  FakeTransport transport;
  transport.answer = [](const FakeRequest& r) {
    FakeRequest more = r;
    if (r.metrics.empty() || std::count(r.metrics.begin(), r.metrics.end(), "m2")) {
      more.nodes = {r.nodes.front(), r.nodes.front(), r.nodes.front(), r.nodes.front()};
    }
    FakeAnswer answer = TooMuchOver(more, 3);
    if (answer.status == 200) answer.body = "";  // the request's own rows
    return answer;
  };
  CollectingSink sink;
  UnixNanos end = kT0 + 16 * kNanosPerSecond;
  Outcome run = FetchWith(&transport, &sink, {Site("lyon", {"a-1"}, 0.01)}, kT0, end);
  ASSERT_TRUE(run.status.ok());
  ASSERT_EQ(run.report.failures.size(), 1u);
  const MissingPiece& failure = run.report.failures[0];
  EXPECT_EQ(failure.metrics, std::vector<std::string>{"m2"});
  EXPECT_EQ(failure.start, kT0);
  EXPECT_EQ(failure.end, end);
  EXPECT_NE(failure.error.message().find("too much data"), std::string::npos);
  std::set<Row> expected;
  for (const Row& row : Expected("lyon", {"a-1"}, kT0, end)) {
    if (std::get<2>(row) != "m2") expected.insert(row);
  }
  EXPECT_EQ(std::set<Row>(sink.rows.begin(), sink.rows.end()), expected);
  EXPECT_LT(transport.log.size(), 200u);
}

TEST(Fetcher, ARetryAfterBeyondTheLimitFailsAtOnce) {
  FakeTransport transport;
  transport.answer = [](const FakeRequest&) {
    FakeAnswer answer{429, ""};
    answer.retry_after_s = 3600;
    return answer;
  };
  CollectingSink sink;
  Outcome run =
      FetchWith(&transport, &sink, {Site("lyon", {"a-1"}, 3)}, kT0, kT0 + 10 * kNanosPerSecond);
  ASSERT_TRUE(run.status.ok());
  EXPECT_EQ(run.report.requests, 1);
  ASSERT_EQ(run.report.failures.size(), 1u);
  EXPECT_NE(run.report.failures[0].error.message().find("3600 s"), std::string::npos);
}

TEST(Fetcher, StaysWithinItsConcurrency) {
  FakeTransport transport;
  CollectingSink sink;
  ClientOptions options;
  options.max_rows_per_request = 50;
  options.max_concurrency = 4;
  options.max_per_site = 3;
  Outcome run = FetchWith(&transport, &sink, {Site("lyon", {"a-1"}, 3), Site("nancy", {"b-1"}, 3)},
                          kT0, kT0 + 600 * kNanosPerSecond, options);
  ASSERT_TRUE(run.status.ok());
  EXPECT_LE(transport.most_in_flight, 4u);
  EXPECT_GT(transport.log.size(), 20u);
}

}  // namespace
}  // namespace kwatt::kwollect::internal::fetch_test
