// kwatt: the command-line tool. One subcommand per capability (doc/cli.md).
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/kwatt/commands.h"
#include "kwatt/core/version.h"

namespace kwatt::cli {
namespace {

// Every command writes its report on stdout through stdio, buffered: whether it reached its
// destination (a full disk, /dev/full, a file over its quota) is known only once flushed. One
// check for the whole CLI, so that no command exits 0 with its output lost.
int FinishOutput(const CLI::App& app, int code) {
  errno = 0;
  bool flushed = std::fflush(stdout) == 0;
  int error = errno;
  if (flushed && !std::ferror(stdout)) return code;
  std::string command = "kwatt";
  for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
    sub = sub->get_subcommands().front();
    command += " " + sub->get_name();
  }
  std::fprintf(stderr, "%s: cannot write its output (stdout)%s%s: what it printed is incomplete\n",
               command.c_str(), error != 0 ? ": " : "", error != 0 ? std::strerror(error) : "");
  return code == kExitOk ? kExitFailure : code;
}

}  // namespace
}  // namespace kwatt::cli

int main(int argc, char** argv) {
  CLI::App app{"kwatt: the energy and the metrics of experiments on Grid'5000 (Kwollect)"};
  app.set_version_flag("--version", std::string("kwatt ") + kwatt::KwattVersion());
  app.require_subcommand(1);
  std::vector<kwatt::cli::Runner> runners = {
      kwatt::cli::RegisterServe(&app),    kwatt::cli::RegisterFetch(&app),
      kwatt::cli::RegisterBackup(&app),   kwatt::cli::RegisterEnergy(&app),
      kwatt::cli::RegisterSimulate(&app), kwatt::cli::RegisterStats(&app),
      kwatt::cli::RegisterInspect(&app),  kwatt::cli::RegisterCat(&app),
      kwatt::cli::RegisterExport(&app),   kwatt::cli::RegisterImport(&app),
      kwatt::cli::RegisterStore(&app),    kwatt::cli::RegisterCollect(&app),
      kwatt::cli::RegisterJobs(&app),     kwatt::cli::RegisterMeter(&app),
      kwatt::cli::RegisterReport(&app)};
  // `kwatt NOSUCH --help` would print the main help and exit 0: an unknown command is an error
  // whatever follows it.
  const CLI::App& commands = app;
  auto named = [&](const CLI::App* sub) { return sub->check_name(argv[1]); };
  if (argc > 1 && argv[1][0] != '-' && commands.get_subcommands(named).empty()) {
    std::string known;
    for (const CLI::App* sub : commands.get_subcommands([](const CLI::App*) { return true; })) {
      known += " " + sub->get_name();
    }
    std::fprintf(stderr, "kwatt: no command \"%s\" (commands:%s); kwatt --help tells more\n",
                 argv[1], known.c_str());
    return kwatt::cli::kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);  // prints the message (or the help)
    return code == 0 ? 0 : kwatt::cli::kExitUsage;
  }
  for (const auto& run : runners) {
    int code = run();
    if (code >= 0) return kwatt::cli::FinishOutput(app, code);
  }
  return 0;
}
