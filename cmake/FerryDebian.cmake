# A Debian package of what `cmake --install` installs: `cpack -G DEB` in a build tree
# makes ferry_VERSION_ARCH.deb, one package (libferry with its header, CMake and
# pkg-config files; ferry-master and the other tools; the Python package), so that
# `apt install ./ferry_*.deb` is a whole install. One package rather than a lib/-dev/tools
# split: the tools and the bindings are small, and a split would only add version pins.
# Its Depends come from dpkg-shlibdeps (dpkg-dev): whatever the binaries link. A package to
# share wants -DFERRY_NATIVE=OFF: a -march=native build runs only on CPUs like the builder's.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ferry)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "the ferry maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "peer-to-peer WAN training runtime: C API, master, tools and Python bindings")
set(CPACK_PACKAGE_DESCRIPTION "ferry joins peers into rings that all-reduce and all-gather over the\
 internet, bit-exact on every peer, with peers joining and leaving while a run goes on. This\
 package holds libferry and its C header, ferry-master (the coordinator), ferry-bench, ferry-chaos\
 and the Python package `ferry` for Debian's python3.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The tools need the package's own libferry.so.0: dpkg-shlibdeps finds it in the staging tree.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_INSTALL_LIBDIR})
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# The Python package runs on Debian's python3 and takes torch or NumPy if they are there.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch, python3-numpy")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
