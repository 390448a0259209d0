#include "kwatt/backup/row_source.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_set>

#include "kwatt/archive/manifest.h"
#include "kwatt/archive/source.h"
#include "kwatt/core/time.h"

namespace kwatt::backup {

namespace {

// A series a source gave: (site, device id, metric id).
using SeriesKey = std::tuple<std::string, std::string, std::string>;

// Passes rows on, noting each (site, device, metric) it saw; Begin is passed on only when asked
// (the rows of another archive follow a Begin already given).
class SeriesNoter : public RowSink {
 public:
  SeriesNoter(RowSink* next, std::set<SeriesKey>* seen, bool pass_begin)
      : next_(next), seen_(seen), pass_begin_(pass_begin) {}
  Status Begin(const RowsReport& resolved) override {
    return pass_begin_ ? next_->Begin(resolved) : Status::OK();
  }
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override {
    if (&interner != interner_ || site != site_) {  // ids are the interner's, per site
      interner_ = &interner;
      site_ = std::string(site);
      ids_.clear();
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (ids_.insert(uint64_t(batch.device[i]) << 32 | batch.metric[i]).second) {
        seen_->emplace(site_, std::string(interner.Get(batch.device[i])),
                       std::string(interner.Get(batch.metric[i])));
      }
    }
    return next_->Write(site, batch, interner);
  }
  Status Failed(const MissingPiece& failure) override { return next_->Failed(failure); }

 private:
  RowSink* next_;
  std::set<SeriesKey>* seen_;
  bool pass_begin_;
  const StringInterner* interner_ = nullptr;
  std::string site_;
  std::unordered_set<uint64_t> ids_;
};

Result<RowsReport> FeedOne(const RowSource& source, const std::vector<std::string>& metrics,
                           RowSink* sink, const ProgressCallback& progress) {
  if (!source.archive_dir.empty()) {
    if (source.query.job) return Status::InvalidArgument("give an archive or a job, not both");
    RowsReport report;
    KWATT_RETURN_IF_ERROR(archive::FeedArchive(
        source.archive_dir, metrics.empty() ? source.query.metrics : metrics, source.query.start,
        source.query.end, sink, &report, source.query.nodes));
    return report;
  }
  kwollect::FetchQuery query = source.query;
  if (!metrics.empty()) query.metrics = metrics;
  return kwollect::Fetch(source.options, query, sink, progress);
}

std::string SamplesOrSummaries(bool summary) { return summary ? "5-minute summaries" : "samples"; }

// Another archive's rows of `report`'s nodes and window, of `metrics` (empty: all), but for the
// series `seen` holds; notes what it gives in `seen`. `shared`: RowSource::with_archives_shared.
Status FeedWithArchive(const std::string& dir, const std::vector<std::string>& metrics, bool shared,
                       RowSink* sink, std::set<SeriesKey>* seen, RowsReport* report) {
  Result<archive::Manifest> manifest = archive::ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  if (!manifest->complete) return Status::Incomplete(archive::IncompleteArchiveMessage(*manifest));
  if (manifest->window_end < report->start || manifest->window_start > report->end) {
    if (shared) return Status::OK();
    return Status::InvalidArgument(
        "archive " + dir + " holds " + FormatParisTimestamp(manifest->window_start) + " to " +
        FormatParisTimestamp(manifest->window_end) + ", outside the window read (" +
        FormatParisTimestamp(report->start) + " to " + FormatParisTimestamp(report->end) +
        "): give the recording made during it");
  }
  if (manifest->query.summary != report->summary) {
    return Status::InvalidArgument(
        "archive " + dir + " holds " + SamplesOrSummaries(manifest->query.summary) +
        ", the rows it is read with " + SamplesOrSummaries(report->summary) +
        ": read both as samples, or both as summaries");
  }
  std::string ours;
  for (const NodeName& node : report->nodes) ours += (ours.empty() ? "" : ", ") + node.Fqdn();
  bool read = false;  // a node of it is the source's
  for (const archive::ManifestNode& held : manifest->nodes) {
    auto node = std::find_if(report->nodes.begin(), report->nodes.end(),
                             [&](const NodeName& n) { return n.Fqdn() == held.node; });
    if (node == report->nodes.end()) {
      if (shared) continue;
      return Status::InvalidArgument(
          "archive " + dir + " holds node " + held.node + ", which is not among the nodes read (" +
          ours +
          "): give it with the rows of that node, or record the node under its Grid'5000 "
          "name (kwatt meter --output-node UID --site SITE)");
    }
    read = true;
    std::vector<std::string> take;  // its metrics asked for that no earlier source gave
    for (const archive::ManifestFile& file : manifest->files) {
      if (file.node != held.node) continue;
      for (const auto& [metric, rows] : file.metrics) {
        bool asked =
            metrics.empty() || std::find(metrics.begin(), metrics.end(), metric) != metrics.end();
        if (rows > 0 && asked && !seen->contains({node->site, node->uid, metric})) {
          take.push_back(metric);
        }
      }
    }
    if (take.empty()) continue;
    SeriesNoter noter(sink, seen, /*pass_begin=*/false);
    RowsReport fed;
    KWATT_RETURN_IF_ERROR(
        archive::FeedArchive(dir, take, report->start, report->end, &noter, &fed, {*node}));
    report->rows += fed.rows;
  }
  if (!read) return Status::OK();  // shared, and none of its nodes is the source's
  report->with_archives.push_back(dir);
  for (const ClusterCatalogue& cluster : manifest->catalogue) {
    if (FindCatalogue(report->catalogues, cluster.cluster) == nullptr) {
      report->catalogues.push_back(cluster);
    }
  }
  return Status::OK();
}

}  // namespace

Result<RowsReport> FeedSource(const RowSource& source, const std::vector<std::string>& metrics,
                              RowSink* sink, const ProgressCallback& progress) {
  if (source.with_archives.empty()) return FeedOne(source, metrics, sink, progress);
  std::set<SeriesKey> seen;
  SeriesNoter noter(sink, &seen, /*pass_begin=*/true);
  Result<RowsReport> report = FeedOne(source, metrics, &noter, progress);
  if (!report.ok()) return report;
  for (const std::string& dir : source.with_archives) {
    KWATT_RETURN_IF_ERROR(FeedWithArchive(dir, metrics.empty() ? source.query.metrics : metrics,
                                          source.with_archives_shared, sink, &seen, &*report));
  }
  return report;
}

}  // namespace kwatt::backup
