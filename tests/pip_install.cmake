# The pip test: `pip install` of python/ (python/pyproject.toml) into a scratch folder, offline and
# without build isolation, then tests/installed_python_check.py on what it installed, with
# UMA_LIBRARY naming the built libuma_c.so. pip runs on a copy of python/, which must come out of
# it as it went in: python/'s build backend (_backend/uma_backend.py) leaves no build/ or
# uma.egg-info beside pyproject.toml (issue 36). Skipped where pip, setuptools or wheel is missing.
#
#   cmake -DPYTHON_SOURCE_DIR=... -DWORK_DIR=... -DPYTHON=... -DPYTHON_CHECK=... -DLIBRARY=...
#         -P tests/pip_install.cmake
cmake_minimum_required(VERSION 3.25)

foreach(required PYTHON_SOURCE_DIR WORK_DIR PYTHON PYTHON_CHECK LIBRARY)
  if(NOT ${required})
    message(FATAL_ERROR "pip_install.cmake: -D${required}=... is required")
  endif()
endforeach()

execute_process(COMMAND "${PYTHON}" -c "import setuptools, wheel" RESULT_VARIABLE rc
                OUTPUT_QUIET ERROR_QUIET)
execute_process(COMMAND "${PYTHON}" -m pip --version RESULT_VARIABLE pip_rc
                OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 0 OR NOT pip_rc EQUAL 0)
  message("skipped: ${PYTHON} lacks pip, setuptools or wheel (Debian: python3-pip)")
  return()
endif()

set(source "${WORK_DIR}/source")
set(target "${WORK_DIR}/target")
file(REMOVE_RECURSE "${WORK_DIR}")
file(COPY "${PYTHON_SOURCE_DIR}/pyproject.toml" "${PYTHON_SOURCE_DIR}/_backend"
          "${PYTHON_SOURCE_DIR}/uma_c" "${PYTHON_SOURCE_DIR}/uma_torch"
          "${PYTHON_SOURCE_DIR}/uma_cupy"
     DESTINATION "${source}" PATTERN "__pycache__" EXCLUDE)
file(GLOB_RECURSE before LIST_DIRECTORIES true RELATIVE "${source}" "${source}/*")

execute_process(COMMAND "${CMAKE_COMMAND}" -E env PIP_CONFIG_FILE=/dev/null
                        PIP_DISABLE_PIP_VERSION_CHECK=1
                        "${PYTHON}" -m pip install --no-build-isolation --no-deps --no-index
                        --target "${target}" "${source}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pip install of ${PYTHON_SOURCE_DIR} failed (${rc}):\n${out}")
endif()
file(GLOB_RECURSE after LIST_DIRECTORIES true RELATIVE "${source}" "${source}/*")
list(FILTER after EXCLUDE REGEX "(^|/)__pycache__(/|$)")  # Python's own, for any import
if(NOT after STREQUAL before)
  list(REMOVE_ITEM after ${before})
  message(FATAL_ERROR "pip install wrote into the source folder ${source}: ${after}")
endif()
file(GLOB dist_info "${target}/uma-*.dist-info")
if(NOT dist_info)
  message(FATAL_ERROR "pip installed no uma-*.dist-info into ${target}:\n${out}")
endif()

execute_process(COMMAND "${CMAKE_COMMAND}" -E env "UMA_LIBRARY=${LIBRARY}" "PYTHONPATH=${target}"
                        PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
                        "${PYTHON}" "${PYTHON_CHECK}" "${target}" "${LIBRARY}"
                WORKING_DIRECTORY "${WORK_DIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the pip-installed packages failed their check (${rc}):\n${out}")
endif()
get_filename_component(dist_info "${dist_info}" NAME)
message("${out}OK: pip installed ${dist_info}")
