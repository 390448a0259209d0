// `kwatt jobs add|list|end`: the jobs of a store (a monitor job switches on optional metrics,
// doc/collect.md).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/kwatt/commands.h"
#include "kwatt/collect/config.h"
#include "kwatt/core/text.h"
#include "kwatt/jobs/job.h"
#include "kwatt/jobs/jobs_file.h"
#include "kwatt/simulate/testbed.h"
#include "kwatt/store/open_store.h"

namespace kwatt::cli {
namespace {

struct JobsArgs {
  std::string store, site, user = "kwatt", nodes, types, start, stop, at, from, testbed;
  int64_t id = 0;
  bool json = false, running = false, replace = false;
};

// The nodes of a job of `site` as `--nodes` names them (nova-1, nova-1.lyon,
// nova-1.lyon.grid5000.fr): their uids, each once, each a node of the site in `testbed`.
Result<std::vector<std::string>> JobNodes(const std::string& list, const std::string& site,
                                          const simulate::Testbed& testbed,
                                          const std::string& testbed_file) {
  const simulate::Site* known = testbed.FindSite(site);
  if (!known) {
    std::string sites;
    for (const auto& other : testbed.sites()) sites += (sites.empty() ? "" : ", ") + other->uid;
    return Status::InvalidArgument(
        "--site " + site + " is not a site of " +
        (testbed_file.empty() ? "Grid'5000" : testbed_file) + " (" + sites + ")" +
        (testbed_file.empty() ? ": for a lab's own nodes, give its description with --testbed "
                                "FILE (doc/store.md, \"Describing a testbed\")"
                              : ""));
  }
  std::vector<std::string> uids;
  for (const std::string& text : SplitCommaList(list)) {
    std::string quoted = "--nodes: \"" + text + "\"";
    std::optional<jobs::JobNodeName> name = jobs::SplitJobNodeName(text);
    if (!name) {
      return Status::InvalidArgument(quoted +
                                     " is not a node name: give a node uid (nova-1) or FQDN "
                                     "(nova-1.lyon.grid5000.fr)");
    }
    if (!name->site.empty() && name->site != site) {
      return Status::InvalidArgument(quoted + " is a node of site " + name->site +
                                     ", but the job is of site " + site +
                                     " (--site): an OAR job lives on one site");
    }
    if (std::find(uids.begin(), uids.end(), name->uid) != uids.end()) {
      return Status::InvalidArgument(quoted + " is " + name->uid +
                                     " again: list each node of a job once");
    }
    std::string unknown = testbed.UnknownNode(*known, name->uid);
    if (!unknown.empty()) return Status::InvalidArgument(quoted + ": " + unknown);
    uids.push_back(name->uid);
  }
  if (uids.empty()) return Status::InvalidArgument("--nodes names no node");
  return uids;
}

// The jobs `kwatt jobs add` is asked to add, checked (ids, times, nodes) before the store is
// opened.
Result<std::vector<jobs::Job>> JobsToAdd(const JobsArgs& args, bool id_given, UnixNanos now) {
  simulate::Testbed::Options testbed_options;
  testbed_options.description_file = args.testbed;
  std::vector<jobs::Job> jobs;
  if (!args.from.empty()) {
    if (id_given || !args.nodes.empty() || !args.site.empty()) {
      return Status::InvalidArgument(
          "--from takes its jobs' sites, ids and nodes from the file: "
          "give no --site, --id or --nodes with it");
    }
    KWATT_ASSIGN_OR_RETURN(jobs::JobSet set, jobs::JobSet::Load(args.from));
    // Its sites and nodes checked against the testbed's, as the server checks a jobs file.
    KWATT_ASSIGN_OR_RETURN(std::unique_ptr<simulate::Testbed> testbed,
                           simulate::Testbed::Build(testbed_options, set));
    for (const jobs::Job& job : testbed->jobs().jobs) {
      for (const std::string& type : job.types) {
        KWATT_RETURN_IF_ERROR(collect::CheckJobType(type).WithContext(
            args.from + ": job " + job.site + "/" + std::to_string(job.uid)));
      }
      jobs.push_back(job);
    }
    return jobs;
  }
  if (args.site.empty() || args.nodes.empty()) {
    return Status::InvalidArgument("give --site and --nodes (or --from a jobs file)");
  }
  if (id_given && args.id <= 0) {
    return Status::InvalidArgument("--id " + std::to_string(args.id) +
                                   ": an OAR job id is a positive integer (or leave --id out: "
                                   "one more than the site's highest)");
  }
  if (args.replace && !id_given) {
    return Status::InvalidArgument("--replace replaces the job of an --id: give it");
  }
  jobs::Job job;
  job.site = args.site;
  job.user = args.user;
  job.uid = args.id;
  KWATT_ASSIGN_OR_RETURN(std::unique_ptr<simulate::Testbed> testbed,
                         simulate::Testbed::Build(testbed_options, jobs::JobSet()));
  KWATT_ASSIGN_OR_RETURN(job.nodes, JobNodes(args.nodes, args.site, *testbed, args.testbed));
  job.types = SplitCommaList(args.types);
  for (const std::string& type : job.types) {
    KWATT_RETURN_IF_ERROR(collect::CheckJobType(type).WithContext("--types"));
  }
  job.started_at = now;
  auto time_of = [&](const std::string& text, const char* option) -> Result<UnixNanos> {
    Result<UnixNanos> t = ParseUserTime(text, now);
    if (!t.ok()) return Status::InvalidArgument(std::string(option) + ": " + t.status().message());
    return t;
  };
  if (!args.start.empty()) {
    KWATT_ASSIGN_OR_RETURN(job.started_at, time_of(args.start, "--start"));
  }
  if (!args.stop.empty()) {
    KWATT_ASSIGN_OR_RETURN(UnixNanos stop, time_of(args.stop, "--stop"));
    if (stop <= job.started_at) return Status::InvalidArgument("--stop is not after --start");
    job.stopped_at = stop;
  }
  jobs.push_back(std::move(job));
  return jobs;
}

}  // namespace

Runner RegisterJobs(CLI::App* app) {
  auto args = std::make_shared<JobsArgs>();
  CLI::App* command = app->add_subcommand(
      "jobs", "The jobs of a store: add, list, end (monitor jobs switch on optional metrics)");
  command->require_subcommand(1);
  auto add_store = [&](CLI::App* sub) {
    sub->add_option("--store", args->store, "The store (a file or postgresql://...)")
        ->required()
        ->check(NonEmptyPath());
  };
  CLI::App* add = command->add_subcommand("add", "Add a job (or the jobs of a jobs file)");
  add_store(add);
  add->add_option("--site", args->site, "Its site");
  CLI::Option* id_option = add->add_option(
      "--id", args->id, "Its id, a positive integer (default: one more than the site's highest)");
  add->add_flag("--replace", args->replace,
                "Replace the site's job of that id when it has one (else an existing id is "
                "refused)");
  add->add_option("--user", args->user, "Its user")->capture_default_str();
  add->add_option("--nodes", args->nodes,
                  "Its nodes: nova-1,nova-2 (or nova-1.lyon, nova-1.lyon.grid5000.fr)");
  add->add_option("--types", args->types, "Its OAR types: monitor, monitor=wattmetre_power_watt");
  add->add_option("--start", args->start, "When it started (default: now)");
  add->add_option("--stop", args->stop, "When it stopped (default: still running)");
  add->add_option("--from", args->from,
                  "A jobs file (the simulator's format, doc/jobs_file.md): add its jobs");
  add->add_option("--testbed", args->testbed,
                  "A lab's testbed description (doc/store.md), whose nodes the jobs' must be "
                  "(default: Grid'5000's sites)");
  CLI::App* list = command->add_subcommand("list", "List a site's jobs");
  add_store(list);
  list->add_option("--site", args->site, "The site")->required();
  list->add_flag("--running", args->running, "Only the jobs running now");
  list->add_flag("--json", args->json, "One JSON object per job");
  CLI::App* end = command->add_subcommand("end", "End a running job");
  add_store(end);
  end->add_option("id", args->id, "The job's id")->required();
  end->add_option("--site", args->site, "Its site")->required();
  end->add_option("--at", args->at, "When it ended (default: now)");
  return [command, add, end, id_option, args]() -> int {
    if (!command->parsed()) return -1;
    UnixNanos now = WallClockNow();
    auto time_of = [&](const std::string& text, const char* option) -> Result<UnixNanos> {
      Result<UnixNanos> t = ParseUserTime(text, now);
      if (!t.ok())
        return Status::InvalidArgument(std::string(option) + ": " + t.status().message());
      return t;
    };
    if (add->parsed()) {
      bool id_given = id_option->count() > 0;
      Result<std::vector<jobs::Job>> jobs = JobsToAdd(*args, id_given, now);
      if (!jobs.ok()) return Fail("jobs add", jobs.status());
      Result<std::unique_ptr<store::Store>> opened = store::OpenStore(args->store, true);
      if (!opened.ok()) return Fail("jobs add", opened.status());
      for (const jobs::Job& job : *jobs) {
        // One transaction each: processes adding jobs at once get distinct ids, keep every job.
        Result<int64_t> id = job.uid;
        if (args->replace) {
          Status put = (*opened)->PutJob(job);
          if (!put.ok()) id = put;
        } else {
          id = (*opened)->AddJob(job, /*next_id=*/args->from.empty() && !id_given);
        }
        if (!id.ok()) return Fail("jobs add", id.status());
        std::printf("%lld\n", (long long)*id);
      }
      return kExitOk;
    }
    Result<std::unique_ptr<store::Store>> opened = store::OpenStore(args->store, false);
    if (!opened.ok()) return Fail("jobs", opened.status());
    store::Store& target = **opened;
    if (end->parsed()) {
      Result<jobs::Job> job = target.GetJob(args->site, args->id);
      if (!job.ok()) return Fail("jobs end", job.status());
      UnixNanos at = now;
      if (!args->at.empty()) {
        Result<UnixNanos> t = time_of(args->at, "--at");
        if (!t.ok()) return Fail("jobs end", t.status());
        at = *t;
      }
      if (job->stopped_at) {
        return Fail("jobs end", Status::InvalidArgument("job " + std::to_string(args->id) +
                                                        " ended already, at " +
                                                        FormatParisTimestamp(*job->stopped_at)));
      }
      if (at <= job->started_at) {
        return Fail("jobs end",
                    Status::InvalidArgument("the end is not after the job's start (" +
                                            FormatParisTimestamp(job->started_at) + ")"));
      }
      job->stopped_at = at;
      Status put = target.PutJob(*job);
      if (!put.ok()) return Fail("jobs end", put);
      return kExitOk;
    }
    Result<std::vector<jobs::Job>> jobs = target.Jobs(args->site, INT64_MIN, INT64_MAX);
    if (!jobs.ok()) return Fail("jobs list", jobs.status());
    for (const jobs::Job& job : *jobs) {
      bool running = job.started_at <= now && (!job.stopped_at || *job.stopped_at > now);
      if (args->running && !running) continue;
      if (args->json) {
        nlohmann::json object = {
            {"site", job.site},
            {"id", job.uid},
            {"user", job.user},
            {"nodes", job.nodes},
            {"types", job.types},
            {"start", FormatParisTimestamp(job.started_at)},
            {"stop", job.stopped_at ? nlohmann::json(FormatParisTimestamp(*job.stopped_at))
                                    : nlohmann::json()}};
        std::printf("%s\n", object.dump().c_str());
      } else {
        std::string nodes, types;
        for (const auto& node : job.nodes) nodes += (nodes.empty() ? "" : ",") + node;
        for (const auto& type : job.types) types += (types.empty() ? "" : ",") + type;
        // One line a job whatever a store holds (one written before its texts were checked):
        // control characters shown escaped, newlines and tabs included.
        auto field = [](const std::string& text) {
          std::string out;
          for (char c : ForTerminal(text)) {
            out += c == '\n'   ? std::string("\\n")
                   : c == '\t' ? std::string("\\t")
                               : std::string(1, c);
          }
          return out;
        };
        std::printf("%lld\t%s\t%s\t%s\t%s\t%s\n", (long long)job.uid, field(job.user).c_str(),
                    FormatParisTimestamp(job.started_at).c_str(),
                    job.stopped_at ? FormatParisTimestamp(*job.stopped_at).c_str() : "running",
                    field(nodes).c_str(), types.empty() ? "-" : field(types).c_str());
      }
    }
    return kExitOk;
  };
}

}  // namespace kwatt::cli
