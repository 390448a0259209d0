# The wheels' cross-build (doc/install.md, "Wheels"): zig's clang with its static libc++ for an
# old glibc, against the C libraries of a Debian 11 root, so that kwatt and its module run where
# glibc is 2.31 (Grid'5000's frontends and nodes) or newer. packaging/wheels.sh makes the root and
# the compiler's wrappers and passes this file to CMake; nothing of the build machine's /usr is
# seen but its programs.
#
# Cache variables (packaging/wheels.sh sets them):
#   KWATT_ZIG_BIN   a directory with the wrappers c++, ar and ranlib (zig c++ -target ..., zig ar)
#   KWATT_SYSROOT   the Debian root holding the -dev packages (its /usr/include, its libraries)
#   KWATT_HEADERS   a prefix whose include/ holds the header-only libraries (nlohmann/json,
#                   CLI11; Boost.Beast and Asio are the root's, from its libboost-dev)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

foreach(_kwatt_var KWATT_ZIG_BIN KWATT_SYSROOT KWATT_HEADERS)
  if(NOT ${_kwatt_var} AND DEFINED ENV{${_kwatt_var}})
    set(${_kwatt_var} "$ENV{${_kwatt_var}}")
  endif()
  if(NOT ${_kwatt_var})
    message(FATAL_ERROR "kwatt's zig toolchain needs ${_kwatt_var} (packaging/wheels.sh sets it)")
  endif()
  set(${_kwatt_var} "${${_kwatt_var}}" CACHE PATH "kwatt's cross-build" FORCE)
  # try_compile's projects see them too.
  list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ${_kwatt_var})
endforeach()

set(CMAKE_CXX_COMPILER "${KWATT_ZIG_BIN}/c++")
set(CMAKE_AR "${KWATT_ZIG_BIN}/ar" CACHE FILEPATH "zig ar")
set(CMAKE_RANLIB "${KWATT_ZIG_BIN}/ranlib" CACHE FILEPATH "zig ranlib")

# The root's headers after zig's libc and libc++ (-idirafter): its libraries' headers are found,
# its glibc's and libstdc++'s never are.
set(_kwatt_root_includes "${KWATT_SYSROOT}/usr/include/x86_64-linux-gnu" "${KWATT_SYSROOT}/usr/include")
set(CMAKE_CXX_FLAGS_INIT "")
foreach(_kwatt_dir ${_kwatt_root_includes})
  string(APPEND CMAKE_CXX_FLAGS_INIT " -idirafter ${_kwatt_dir}")
endforeach()
# ... and never as -isystem (which would put them before libc++'s): CMake leaves out the
# compiler's implicit directories, which these are made after project() (CMAKE_PROJECT_INCLUDE).
set(KWATT_IMPLICIT_INCLUDES ${_kwatt_root_includes} CACHE INTERNAL "")
set(CMAKE_PROJECT_INCLUDE "${CMAKE_CURRENT_LIST_DIR}/zig-after-project.cmake")

# Libraries, headers and CMake packages from the root and the headers' prefix alone; programs
# (pkg-config, python) from the build machine.
set(CMAKE_FIND_ROOT_PATH "${KWATT_SYSROOT}" "${KWATT_HEADERS}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_LIBRARY_ARCHITECTURE x86_64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR}
    "${KWATT_SYSROOT}/usr/lib/x86_64-linux-gnu/pkgconfig:${KWATT_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${KWATT_SYSROOT}")
