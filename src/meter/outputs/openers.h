// Each output's opener: the output an --output spec names, checked as far as it can be before
// the meter starts (InvalidArgument or PermissionDenied naming spec.shown). Each is defined in its
// output's file; open_output.cc, the factory, alone calls them. Private to the meter's outputs.
#ifndef KWATT_SRC_METER_OUTPUTS_OPENERS_H_
#define KWATT_SRC_METER_OUTPUTS_OPENERS_H_

#include <memory>

#include "kwatt/meter/outputs/outputs.h"
#include "src/meter/outputs/output_spec.h"

namespace kwatt::meter::internal {

using OutputOpener = Result<std::unique_ptr<OutputSink>>(const OutputSpec& spec,
                                                         const OutputOptions& options);

OutputOpener OpenCsvOrJsonlOutput;            // csv:PATH, jsonl:PATH (csv_jsonl.cc)
OutputOpener OpenInfluxdbOutput;              // influxdb:URL (influxdb.cc)
OutputOpener OpenKwollectOutput;              // kwollect:URL (kwollect.cc)
OutputOpener OpenNodeExporterTextfileOutput;  // textfile:DIR (node_exporter_textfile.cc)
OutputOpener OpenArchiveOutput;               // archive:DIR (archive.cc)
OutputOpener OpenPowerApiOutput;              // powerapi-csv:DIR, powerapi-json:PATH,
                                              // powerapi-formula-json:PATH (powerapi_files.cc)

}  // namespace kwatt::meter::internal

#endif  // KWATT_SRC_METER_OUTPUTS_OPENERS_H_
