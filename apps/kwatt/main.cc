// kwatt: the command-line tool. One subcommand per capability (doc/cli.md).
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "apps/kwatt/commands.h"

#ifndef KWATT_VERSION
#define KWATT_VERSION "0.0.0"
#endif

int main(int argc, char** argv) {
  CLI::App app{"kwatt: the energy and the metrics of experiments on Grid'5000 (Kwollect)"};
  app.set_version_flag("--version", std::string("kwatt ") + KWATT_VERSION);
  app.require_subcommand(1);
  std::vector<kwatt::cli::Runner> runners = {
      kwatt::cli::RegisterServe(&app),    kwatt::cli::RegisterFetch(&app),
      kwatt::cli::RegisterBackup(&app),   kwatt::cli::RegisterEnergy(&app),
      kwatt::cli::RegisterSimulate(&app), kwatt::cli::RegisterStats(&app),
      kwatt::cli::RegisterInspect(&app),  kwatt::cli::RegisterCat(&app),
      kwatt::cli::RegisterExport(&app),   kwatt::cli::RegisterImport(&app),
      kwatt::cli::RegisterStore(&app),    kwatt::cli::RegisterCollect(&app),
      kwatt::cli::RegisterJobs(&app),     kwatt::cli::RegisterMeter(&app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);  // prints the message (or the help)
    return code == 0 ? 0 : kwatt::cli::kExitUsage;
  }
  for (const auto& run : runners) {
    int code = run();
    if (code >= 0) return code;
  }
  return 0;
}
