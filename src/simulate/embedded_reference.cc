#include "src/simulate/embedded_reference.h"

// Each file is pulled in by the assembler (.incbin), which is fast and needs no generator. The
// directory comes from CMake as KWATT_REFERENCE_DIR.
#define KWATT_STRINGIFY2(x) #x
#define KWATT_STRINGIFY(x) KWATT_STRINGIFY2(x)
#define KWATT_EMBED(symbol, file)                                                                \
  extern "C" const char symbol##_begin[];                                                        \
  extern "C" const char symbol##_end[];                                                          \
  asm(".section .rodata\n.global " #symbol "_begin\n" #symbol                                    \
      "_begin:\n.incbin \"" KWATT_STRINGIFY(KWATT_REFERENCE_DIR) "/" file "\"\n.global " #symbol \
                                                                 "_end\n" #symbol                \
                                                                 "_end:\n.byte 0\n.previous\n");

KWATT_EMBED(kwatt_ref_sites, "sites.json")
KWATT_EMBED(kwatt_ref_wattmetre, "wattmetre-mapping.json")
KWATT_EMBED(kwatt_ref_network, "network-mapping.json")
KWATT_EMBED(kwatt_ref_grenoble_yeti, "clusters/grenoble-yeti.json")
KWATT_EMBED(kwatt_ref_lille_chifflot, "clusters/lille-chifflot.json")
KWATT_EMBED(kwatt_ref_lyon_nova, "clusters/lyon-nova.json")
KWATT_EMBED(kwatt_ref_lyon_taurus, "clusters/lyon-taurus.json")
KWATT_EMBED(kwatt_ref_nancy_gros, "clusters/nancy-gros.json")
KWATT_EMBED(kwatt_ref_nantes_ecotype, "clusters/nantes-ecotype.json")
KWATT_EMBED(kwatt_ref_rennes_paradoxe, "clusters/rennes-paradoxe.json")

namespace kwatt::simulate::internal {

const std::vector<std::pair<std::string_view, std::string_view>>& EmbeddedReferenceFiles() {
#define KWATT_FILE(symbol, file) \
  { file, std::string_view(symbol##_begin, size_t(symbol##_end - symbol##_begin)) }
  static const std::vector<std::pair<std::string_view, std::string_view>> files = {
      KWATT_FILE(kwatt_ref_sites, "sites.json"),
      KWATT_FILE(kwatt_ref_wattmetre, "wattmetre-mapping.json"),
      KWATT_FILE(kwatt_ref_network, "network-mapping.json"),
      KWATT_FILE(kwatt_ref_grenoble_yeti, "clusters/grenoble-yeti.json"),
      KWATT_FILE(kwatt_ref_lille_chifflot, "clusters/lille-chifflot.json"),
      KWATT_FILE(kwatt_ref_lyon_nova, "clusters/lyon-nova.json"),
      KWATT_FILE(kwatt_ref_lyon_taurus, "clusters/lyon-taurus.json"),
      KWATT_FILE(kwatt_ref_nancy_gros, "clusters/nancy-gros.json"),
      KWATT_FILE(kwatt_ref_nantes_ecotype, "clusters/nantes-ecotype.json"),
      KWATT_FILE(kwatt_ref_rennes_paradoxe, "clusters/rennes-paradoxe.json"),
  };
#undef KWATT_FILE
  return files;
}

}  // namespace kwatt::simulate::internal
