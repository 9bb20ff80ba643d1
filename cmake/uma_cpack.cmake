# Debian packages of an installed uma, made by CPack's DEB generator from a built tree:
#
#   cpack --config build/release/CPackConfig.cmake -G DEB -B build/release/packages
#
#   libuma-dev    headers, static libraries, CMake package (find_package(uma)), the link
#                 libuma_c.so -> depends on libuma-c and the -dev packages of what uma's headers
#                 and libraries use
#   libuma-c      libuma_c.so.N (N: UMA_C_ABI_VERSION, the SONAME), the C ABI (C programs, FFIs,
#                 the Python packages)
#   uma-tools     the `uma` command
#   python3-uma   uma_c, uma_torch, uma_cupy (PyTorch and CuPy are not dependencies: only
#                 their install() needs them)
#
# Included by CMakeLists.txt inside if(UMA_INSTALL), after every install() rule.
set(UMA_PACKAGE_MAINTAINER "uma maintainers <maintainers@users.noreply.a-seed-ed545ce5.example>"
    CACHE STRING "The Maintainer field of uma's Debian packages")

set(CPACK_PACKAGE_NAME uma)
set(CPACK_PACKAGE_VENDOR uma)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Each package's description (its first line the summary) is its component's: no common summary
# line, which CPack would put before each.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_PACKAGE_CONTACT "${UMA_PACKAGE_MAINTAINER}")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL dev c tools python)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
# Descriptions: a summary line, then the text (CPack indents it; an empty line separates
# paragraphs).

# Runtime libraries by their Debian 12 package names (what `ldd` shows the binaries load); listed
# by hand rather than by dpkg-shlibdeps, which would make dpkg-dev a build dependency.
# The C ABI joins a node's arbiter over the wire (uma_arbiter_join), so libuma_c.so loads the
# remote interface as the tools do: gRPC (its core and gpr are libgrpc29's), protobuf, OpenSSL,
# and the abseil gRPC's headers inline (tests/deb_packages.cmake checks these lists).
set(uma_c_depends "libc6, libstdc++6, libgcc-s1, libcaf-core0.17 (>= 0.17.6), \
libboost-json1.81.0, libgrpc++1.51, libgrpc29, libprotobuf32, libssl3, libabsl20220623")
set(uma_tools_depends "${uma_c_depends}")
set(uma_deb_version "${PROJECT_VERSION}")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libuma-dev)
# What uma's headers include (CAF, Boost.Asio/Beast/System) and its exported targets link (CAF's
# core through FindCAF; uma::remote's gRPC, protobuf and OpenSSL, which umaConfig.cmake finds
# with pkg-config and CMake's modules); libuma-c because umaTargets.cmake names uma::c.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libuma-c (= ${uma_deb_version}), libcaf-dev (>= 0.17.6), \
libboost1.81-dev, libgrpc++-dev, libprotobuf-dev, libssl-dev, pkg-config")
set(CPACK_COMPONENT_DEV_DESCRIPTION "uma: headers, static libraries and CMake package
uma keeps CUDA managed memory in one CAF actor. This package holds what a C++
program needs to build against uma: the headers (<uma/...>), the static
libraries, the CMake package (find_package(uma), target uma::uma) and the
link libuma_c.so a C program's linker looks for.")
if(UMA_CUDA_ENABLED)
  # The CUDA toolkit is NVIDIA's, not a Debian package here: no Depends can name it. umaConfig.cmake
  # looks for it where uma was built with it, or where CUDAToolkit_ROOT says.
  string(APPEND CPACK_COMPONENT_DEV_DESCRIPTION "

Built with the CUDA backend: linking needs the CUDA toolkit ${CUDAToolkit_VERSION}
(libcudart_static), looked up in ${UMA_CUDA_TOOLKIT_ROOT} or CUDAToolkit_ROOT.")
endif()

set(CPACK_DEBIAN_C_PACKAGE_NAME libuma-c)
set(CPACK_DEBIAN_C_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_C_PACKAGE_DEPENDS "${uma_c_depends}")
set(CPACK_COMPONENT_C_DESCRIPTION "uma: the C ABI library (libuma_c.so.${UMA_C_ABI_VERSION})
libuma_c.so.${UMA_C_ABI_VERSION}, uma's C ABI version ${UMA_C_ABI_VERSION} (<uma/c/uma.h> is in
libuma-dev): what C programs, foreign-function interfaces and the python3-uma
packages load.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME uma-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${uma_tools_depends}")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "uma: the uma command
uma info, demo, stats, regions, snapshot and serve: the backend and its
devices, an allocator's counters, regions and history, in-process or from a
running `uma serve`.")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-uma)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3, libuma-c (= ${uma_deb_version})")
set(CPACK_DEBIAN_PYTHON_PACKAGE_SUGGESTS "python3-torch")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION "uma: Python packages uma_c, uma_torch, uma_cupy
uma_c is uma's C ABI through ctypes; uma_torch and uma_cupy make uma the
allocator of PyTorch and CuPy. The frameworks are not dependencies: the
packages import without them, and only install() asks for them.")

include(CPack)
