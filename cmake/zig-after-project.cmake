# Included after project() by kwatt's zig toolchain (zig-toolchain.cmake): the Debian root's
# include directories count as the compiler's own, so that no target adds them as -isystem
# before libc++'s; the toolchain's -idirafter flags find them.
list(APPEND CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES ${KWATT_IMPLICIT_INCLUDES})
