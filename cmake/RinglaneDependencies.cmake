# SPDX-License-Identifier: BSD-2-Clause
# What ringlane's libraries need from outside, found with pkg-config. One file for the build
# (CMakeLists.txt) and the installed package (ringlaneConfig.cmake), so both ask for the same
# packages and the same minimum versions:
#
#   name     pkg-config  minimum  used by                          why that minimum
#   xxhash   libxxhash   0.8.0    the ring (headers only, inlined)  XXH3's output is final from 0.8.0
#   libmd    libmd       any      the ring (ketama's MD5)
#   zlib     zlib        1.2.9    the ring (groupcache's CRC-32)    crc32_z()
#   libuv    libuv       1.44.0   dispatch, consumer                uv_available_parallelism()
#   rdkafka  rdkafka     1.9.0    kafka, consumer                   rd_kafka_consumer_close_queue()
#
# _ringlane_find_dependency(<name> <GLOBAL|LOCAL> <problem-var> <version-var>)
#   makes the imported target PkgConfig::ringlane_dep_<name> (GLOBAL: visible everywhere, as
#   the build wants; LOCAL: in the calling directory, as a package should) and sets
#   <version-var> to the version found. <problem-var> is empty on success, else what is needed
#   and what was found instead, to follow "needs " ("libuv >= 1.44.0 (for
#   uv_available_parallelism()), but pkg-config finds libuv 1.40.0 (in /usr): ..."). Nothing is done when the target
#   exists already. It changes no other variable: pkg_check_modules runs in the function's
#   scope, and the cache entries it writes are removed (or given back their values) after it.
#
# _ringlane_dependency_info(<name> <module-var> <minimum-var> <why-var> <debian-var>)
#   the table above, row <name>: the pkg-config module, the minimum version ("" for any), the
#   function that needs it, and the Debian package that has it.
function(_ringlane_dependency_info name module_var minimum_var why_var debian_var)
  if(name STREQUAL "xxhash")
    set(row libxxhash 0.8.0 XXH3_64bits libxxhash-dev) # XXH3 is final from 0.8.0
  elseif(name STREQUAL "libmd")
    set(row libmd "" "" libmd-dev)
  elseif(name STREQUAL "zlib")
    set(row zlib 1.2.9 crc32_z zlib1g-dev)
  elseif(name STREQUAL "libuv")
    set(row libuv 1.44.0 uv_available_parallelism libuv1-dev)
  elseif(name STREQUAL "rdkafka")
    set(row rdkafka 1.9.0 rd_kafka_consumer_close_queue librdkafka-dev)
  else()
    message(FATAL_ERROR "ringlane: no dependency named '${name}'")
  endif()
  list(GET row 0 module)
  list(GET row 1 minimum)
  list(GET row 2 why)
  list(GET row 3 debian)
  set(${module_var} "${module}" PARENT_SCOPE)
  set(${minimum_var} "${minimum}" PARENT_SCOPE)
  set(${why_var} "${why}" PARENT_SCOPE)
  set(${debian_var} "${debian}" PARENT_SCOPE)
endfunction()

function(_ringlane_find_dependency name scope problem_var version_var)
  set(${problem_var} "" PARENT_SCOPE)
  set(${version_var} "" PARENT_SCOPE)
  set(target PkgConfig::ringlane_dep_${name})
  if(TARGET ${target})
    get_target_property(version ${target} INTERFACE_RINGLANE_VERSION)
    set(${version_var} "${version}" PARENT_SCOPE)
    return()
  endif()
  _ringlane_dependency_info(${name} module minimum why debian)

  find_package(PkgConfig QUIET)
  if(NOT PKG_CONFIG_FOUND)
    set(${problem_var} "${module}, found with pkg-config, which is missing (Debian: apt-get \
install pkg-config)" PARENT_SCOPE)
    return()
  endif()
  # pkg_check_modules writes cache entries (ours, and FindPkgConfig's prefix_result): what it
  # adds is removed afterwards, and what it changes is put back.
  get_cmake_property(cached_before CACHE_VARIABLES)
  foreach(entry IN LISTS cached_before)
    get_property(type CACHE ${entry} PROPERTY TYPE)
    if(type STREQUAL "INTERNAL")
      get_property(was_${entry} CACHE ${entry} PROPERTY VALUE)
    endif()
  endforeach()

  set(prefix ringlane_dep_${name})
  # First without the target: a version below the minimum must not leave one behind.
  pkg_check_modules(${prefix} QUIET ${module})
  set(version "${${prefix}_VERSION}")
  set(problem "")
  if(minimum)
    set(wanted "${module} >= ${minimum} (for ${why}())")
  else()
    set(wanted "${module}")
  endif()
  if(NOT ${prefix}_FOUND)
    set(problem "${wanted}, which pkg-config does not find (Debian: apt-get install ${debian}, \
or add the directory that holds ${module}.pc to PKG_CONFIG_PATH)")
  elseif(minimum AND version VERSION_LESS minimum)
    set(problem "${wanted}, but pkg-config finds ${module} ${version} (in \
${${prefix}_PREFIX}): install a newer one, or put the directory that holds its ${module}.pc \
first in PKG_CONFIG_PATH")
  else()
    if(scope STREQUAL "GLOBAL")
      pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
    else()
      pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
    endif()
    set_target_properties(${target} PROPERTIES INTERFACE_RINGLANE_VERSION "${version}")
  endif()

  get_cmake_property(cached_after CACHE_VARIABLES)
  foreach(entry IN LISTS cached_after)
    if(NOT entry IN_LIST cached_before)
      unset(${entry} CACHE)
    elseif(DEFINED was_${entry})
      get_property(now CACHE ${entry} PROPERTY VALUE)
      if(NOT "${now}" STREQUAL "${was_${entry}}")
        set_property(CACHE ${entry} PROPERTY VALUE "${was_${entry}}")
      endif()
    endif()
  endforeach()
  set(${problem_var} "${problem}" PARENT_SCOPE)
  set(${version_var} "${version}" PARENT_SCOPE)
endfunction()
