# Installs the Python packages (python/uma_c, uma_torch, uma_cupy: pure Python) with the rest of
# uma, and tells uma_c where libuma_c.so went, so the installed uma_c loads the installed library
# without UMA_LIBRARY or LD_LIBRARY_PATH. Included by CMakeLists.txt inside if(UMA_INSTALL).

# Debian's python3 finds packages in /usr/lib/python3/dist-packages, which is where the .deb puts
# them (prefix /usr). Under any other prefix, either point PYTHONPATH at
# <prefix>/lib/python3/dist-packages or set this to a folder that Python searches there (e.g.
# lib/python3.11/dist-packages under /usr/local: docs/packaging.md).
set(UMA_PYTHON_INSTALL_DIR "lib/python3/dist-packages" CACHE STRING
    "Where `cmake --install` puts uma's Python packages: relative to the prefix, or absolute")

# python/uma_c's __version__ is the pip package's version (python/pyproject.toml reads it): it
# must be the project's.
file(STRINGS ${PROJECT_SOURCE_DIR}/python/uma_c/__init__.py uma_python_version
     REGEX "^__version__ = ")
if(NOT uma_python_version STREQUAL "__version__ = \"${PROJECT_VERSION}\"")
  message(FATAL_ERROR "python/uma_c/__init__.py says '${uma_python_version}', but the project "
                      "is version ${PROJECT_VERSION}: update __version__ there")
endif()

# uma_c/_installed.py: the libdir relative to the installed uma_c, so the pair stays loadable
# wherever the prefix is moved or unpacked (`cmake --install --prefix`, CPack, `dpkg -x`); an
# absolute folder on either side makes it absolute.
if(IS_ABSOLUTE "${UMA_PYTHON_INSTALL_DIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(uma_library_dir "${CMAKE_INSTALL_FULL_LIBDIR}")
else()
  file(RELATIVE_PATH uma_library_dir "/prefix/${UMA_PYTHON_INSTALL_DIR}/uma_c"
       "/prefix/${CMAKE_INSTALL_LIBDIR}")
endif()
file(CONFIGURE OUTPUT python/uma_c/_installed.py CONTENT
"\"\"\"Written by uma's install: the folder it put libuma_c.so in, relative to this package.\"\"\"

LIBRARY_DIR = \"${uma_library_dir}\"
")

install(DIRECTORY python/uma_c python/uma_torch python/uma_cupy
        DESTINATION ${UMA_PYTHON_INSTALL_DIR} COMPONENT python
        PATTERN "__pycache__" EXCLUDE)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/python/uma_c/_installed.py
        DESTINATION ${UMA_PYTHON_INSTALL_DIR}/uma_c COMPONENT python)
