#include "kwatt/backup/backup.h"

#include <memory>

#include "kwatt/core/text.h"

namespace kwatt::backup {

kwollect::FetchQuery FetchQueryToRun(const archive::ArchiveWriter& writer,
                                     const kwollect::FetchQuery& asked) {
  kwollect::FetchQuery query = asked;
  archive::FetchWindow window = writer.WindowToRun({asked.start, asked.end});
  query.start = window.start;
  query.end = window.end;
  return query;
}

Result<BackupOutcome> Backup(const kwollect::ClientOptions& options,
                             const kwollect::FetchQuery& query, const std::string& dir,
                             const std::string& kwatt_version, const ProgressCallback& progress,
                             const std::function<void(bool resuming)>& on_start) {
  archive::BackupQuery described;
  described.api = UrlWithoutCredentials(options.api_url);  // never a credential in a manifest
  for (const NodeName& node : query.nodes) described.nodes.push_back(node.Fqdn());
  if (query.job) described.job = archive::BackupJob{query.job->site, query.job->id};
  described.start = query.start;
  described.end = query.end;
  described.metrics = query.metrics;
  described.summary = query.summary;
  Result<std::unique_ptr<archive::ArchiveWriter>> writer =
      archive::ArchiveWriter::Open(dir, described, kwatt_version);
  if (!writer.ok()) return writer.status();
  BackupOutcome outcome;
  outcome.already_complete = (*writer)->already_complete();
  outcome.resuming = (*writer)->resuming();
  if (outcome.already_complete) {
    outcome.bytes_written = (*writer)->bytes_written();
    return outcome;
  }
  if (on_start) on_start(outcome.resuming);
  Result<RowsReport> report =
      kwollect::Fetch(options, FetchQueryToRun(**writer, query), writer->get(), progress);
  if (!report.ok()) return report.status();
  outcome.report = std::move(*report);
  outcome.finished = (*writer)->Finish(outcome.report);
  outcome.rows_written = (*writer)->rows_written();
  outcome.bytes_written = (*writer)->bytes_written();
  return outcome;
}

}  // namespace kwatt::backup
