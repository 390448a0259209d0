#include "kwatt/rows/source.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_set>

#include "kwatt/archive/manifest.h"
#include "kwatt/archive/source.h"
#include "kwatt/core/time.h"

namespace kwatt::rows {

namespace {

namespace fs = std::filesystem;

// A series a source gave: (site, device id, metric id).
using SeriesKey = std::tuple<std::string, std::string, std::string>;

// Passes the source's rows on, noting each (site, device, metric) series it gave.
class SeriesNoter : public RowSink {
 public:
  SeriesNoter(RowSink* next, std::set<SeriesKey>* seen) : next_(next), seen_(seen) {}
  Status Begin(const RowsReport& resolved) override { return next_->Begin(resolved); }
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override {
    if (interner.serial() != interner_ || site != site_) {  // ids are the interner's, per site
      interner_ = interner.serial();
      site_ = std::string(site);
      ids_.clear();
    }
    uint64_t last = UINT64_MAX;  // a series' rows mostly follow each other
    for (size_t i = 0; i < batch.size(); ++i) {
      uint64_t id = uint64_t(batch.device[i]) << 32 | batch.metric[i];
      if (id != last && ids_.insert(id).second) {
        seen_->emplace(site_, std::string(interner.Get(batch.device[i])),
                       std::string(interner.Get(batch.metric[i])));
      }
      last = id;
    }
    return next_->Write(site, batch, interner);
  }
  Status Failed(const MissingPiece& failure) override { return next_->Failed(failure); }

 private:
  RowSink* next_;
  std::set<SeriesKey>* seen_;
  uint64_t interner_ = 0;  // the serial of the interner ids_ is for
  std::string site_;
  std::unordered_set<uint64_t> ids_;
};

// The source's own rows: its archive's, or its query's.
Result<RowsReport> FeedOne(const RowSource& source, const std::vector<std::string>& metrics,
                           RowSink* sink, const ProgressCallback& progress) {
  if (const FromArchive* archive = std::get_if<FromArchive>(&source.from)) {
    if (source.query.job) return Status::InvalidArgument("give an archive or a job, not both");
    RowsReport report;
    // The archive's rows up to the margin beyond the window asked, where it holds them; the
    // report's window is the one asked (within the archive's).
    const int64_t margin = std::max<int64_t>(0, source.query.margin);
    std::optional<UnixNanos> start = source.query.start, end = source.query.end;
    if (start) *start -= margin;
    if (end) *end += margin;
    KWATT_RETURN_IF_ERROR(archive::FeedArchive(archive->dir,
                                               metrics.empty() ? source.query.metrics : metrics,
                                               start, end, sink, &report, source.query.nodes));
    if (source.query.start) report.start = std::max(report.start, *source.query.start);
    if (source.query.end) report.end = std::min(report.end, *source.query.end);
    return report;
  }
  kwollect::FetchQuery query = source.query;
  if (!metrics.empty()) query.metrics = metrics;
  return kwollect::Fetch(std::get<FromQuery>(source.from).options, query, sink, progress);
}

// Passes another archive's rows on, without its Begin: the sink began with the source's.
class RowsOnly : public RowSink {
 public:
  explicit RowsOnly(RowSink* next) : next_(next) {}
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override {
    return next_->Write(site, batch, interner);
  }

 private:
  RowSink* next_;
};

// Which other archive gave a series, and up to when its window went: a later recording of the
// same series must begin after it (a meter started again into a new directory).
struct Recorded {
  std::string dir;
  UnixNanos window_end = 0;
};

// Why another archive cannot be read with rows of `summary` kind, or "".
std::string KindMismatch(const archive::Manifest& m, bool summary) {
  if (m.query.summary == summary) return "";
  if (summary) {
    return "archive " + m.dir + " holds samples, the rows it is read with 5-minute summaries: " +
           "read them without --summary";
  }
  return "archive " + m.dir + " holds 5-minute summaries, the rows it is read with samples: " +
         "give an archive of samples (a kwatt meter recording, a backup without --summary)";
}

// The other archives, complete, each given once, none the source's own, in the order of their
// windows' starts (so that two recordings of a series, one after the other, come in time order).
Result<std::vector<archive::Manifest>> ReadOtherArchives(const RowSource& source) {
  std::vector<archive::Manifest> out;
  for (const std::string& dir : source.with_archives) {
    Result<archive::Manifest> manifest = archive::ReadManifest(dir);
    if (!manifest.ok()) return manifest.status();
    if (!manifest->complete) {
      return Status::Incomplete(archive::IncompleteArchiveMessage(*manifest));
    }
    std::error_code error;
    const FromArchive* own = std::get_if<FromArchive>(&source.from);
    if (own != nullptr && fs::equivalent(own->dir, dir, error)) {
      return Status::InvalidArgument("archive " + dir +
                                     " is the one read: give another one with it (a kwatt meter "
                                     "recording on its nodes)");
    }
    for (const archive::Manifest& earlier : out) {
      if (fs::equivalent(earlier.dir, dir, error)) {
        return Status::InvalidArgument("archive " + dir + " is given twice");
      }
    }
    out.push_back(std::move(*manifest));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const archive::Manifest& a, const archive::Manifest& b) {
                     return a.window_start < b.window_start;
                   });
  return out;
}

// Another archive's rows of `report`'s nodes and window, of `metrics` (empty: all), but for the
// series the source gave (`from_source`); `recorded` notes what the other archives gave.
// `shared`: RowSource::with_archives_shared.
Status FeedWithArchive(const archive::Manifest& m, const std::vector<std::string>& metrics,
                       bool shared, const std::set<SeriesKey>& from_source,
                       std::map<SeriesKey, Recorded>* recorded, RowSink* sink, RowsReport* report,
                       std::vector<std::string>* archives_read) {
  if (m.window_end < report->start || m.window_start > report->end) {
    if (shared) return Status::OK();
    return Status::InvalidArgument(
        "archive " + m.dir + " holds " + FormatParisTimestamp(m.window_start) + " to " +
        FormatParisTimestamp(m.window_end) + ", outside the window read (" +
        FormatParisTimestamp(report->start) + " to " + FormatParisTimestamp(report->end) +
        "): give the recording made during it");
  }
  if (std::string why = KindMismatch(m, report->summary); !why.empty()) {
    return Status::InvalidArgument(why);
  }
  std::string ours;
  for (const NodeName& node : report->nodes) ours += (ours.empty() ? "" : ", ") + node.Fqdn();
  bool met = false;  // a node of it is the source's
  for (const archive::ManifestNode& held : m.nodes) {
    auto node = std::find_if(report->nodes.begin(), report->nodes.end(),
                             [&](const NodeName& n) { return n.Fqdn() == held.node; });
    if (node == report->nodes.end()) {
      if (shared) continue;
      return Status::InvalidArgument(
          "archive " + m.dir + " holds node " + held.node +
          ", which is not among the nodes read (" + ours +
          "): give it with the rows of that node, or record the node under its Grid'5000 "
          "name (kwatt meter --output-node UID --site SITE)");
    }
    met = true;
    std::vector<std::string> take;  // its metrics asked for that the source did not give
    for (const archive::ManifestFile& file : m.files) {
      if (file.node != held.node) continue;
      for (const auto& [metric, rows] : file.metrics) {
        SeriesKey key{node->site, node->uid, metric};
        bool asked =
            metrics.empty() || std::find(metrics.begin(), metrics.end(), metric) != metrics.end();
        if (rows == 0 || !asked || from_source.contains(key)) continue;
        if (auto before = recorded->find(key);
            before != recorded->end() && m.window_start <= before->second.window_end) {
          return Status::InvalidArgument("archives " + before->second.dir + " and " + m.dir +
                                         " both hold " + held.node + "'s " + metric + " from " +
                                         FormatParisTimestamp(m.window_start) +
                                         ": give one recording of each stretch of time");
        }
        (*recorded)[key] = {m.dir, m.window_end};
        take.push_back(metric);
      }
    }
    if (take.empty()) continue;
    RowsOnly rows(sink);
    RowsReport fed;
    KWATT_RETURN_IF_ERROR(
        archive::FeedArchive(m.dir, take, report->start, report->end, &rows, &fed, {*node}));
    report->rows += fed.rows;
  }
  if (!met) return Status::OK();  // shared, and none of its nodes is the source's
  if (archives_read != nullptr) archives_read->push_back(m.dir);
  for (const ClusterCatalogue& cluster : m.catalogue) {
    if (FindCatalogue(report->catalogues, cluster.cluster) == nullptr) {
      report->catalogues.push_back(cluster);
    }
  }
  return Status::OK();
}

}  // namespace

Result<RowsReport> FeedSource(const RowSource& source, const std::vector<std::string>& metrics,
                              RowSink* sink, const ProgressCallback& progress,
                              std::vector<std::string>* archives_read) {
  if (source.with_archives.empty()) return FeedOne(source, metrics, sink, progress);
  // Checked before the source is read: a fetch is not wasted on an archive refused afterwards.
  Result<std::vector<archive::Manifest>> others = ReadOtherArchives(source);
  if (!others.ok()) return others.status();
  std::set<SeriesKey> from_source;
  SeriesNoter noter(sink, &from_source);
  Result<RowsReport> report = FeedOne(source, metrics, &noter, progress);
  if (!report.ok()) return report;
  std::map<SeriesKey, Recorded> recorded;
  for (const archive::Manifest& m : *others) {
    KWATT_RETURN_IF_ERROR(FeedWithArchive(m, metrics.empty() ? source.query.metrics : metrics,
                                          source.with_archives_shared, from_source, &recorded, sink,
                                          &*report, archives_read));
  }
  return report;
}

}  // namespace kwatt::rows
