# SPDX-License-Identifier: BSD-2-Clause
# rl_add_layer(<name> OBJECTS <object library> [EXPORT <export set>] [PC <pkg-config stem>]
#              [SHARED_LIBS <lib>...] [STATIC_LIBS <lib>...] [PRIVATE_LIBS <lib>...])
#
# One layer's two libraries from its object library: lib<name>.so (versioned SONAME; $ORIGIN
# run path, so an installed layer finds the ones installed beside it) and lib<name>.a, both
# with the public headers, the aliases ringlane::<name> and ringlane::<name>_static, their
# install rules in EXPORT (one export set per component of the CMake package), and the
# pkg-config file made from cmake/<PC>.pc.in. SHARED_LIBS and STATIC_LIBS are each variant's
# public dependencies (the layer below, in the same kind); PRIVATE_LIBS are both variants'
# private ones (a static library's users link them too).
function(rl_add_layer name)
  cmake_parse_arguments(L "" "OBJECTS;EXPORT;PC" "SHARED_LIBS;STATIC_LIBS;PRIVATE_LIBS" ${ARGN})
  add_library(${name} SHARED $<TARGET_OBJECTS:${L_OBJECTS}>)
  set_target_properties(${name} PROPERTIES VERSION ${PROJECT_VERSION}
                        SOVERSION ${PROJECT_VERSION_MAJOR} INSTALL_RPATH "$ORIGIN")
  target_link_libraries(${name} PUBLIC ${L_SHARED_LIBS} PRIVATE ${L_PRIVATE_LIBS})
  add_library(${name}_static STATIC $<TARGET_OBJECTS:${L_OBJECTS}>)
  set_target_properties(${name}_static PROPERTIES OUTPUT_NAME ${name})
  target_link_libraries(${name}_static PUBLIC ${L_STATIC_LIBS} PRIVATE ${L_PRIVATE_LIBS})
  foreach(target ${name} ${name}_static)
    target_include_directories(${target} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    add_library(ringlane::${target} ALIAS ${target})
  endforeach()
  install(TARGETS ${name} ${name}_static EXPORT ${L_EXPORT}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  if(L_PC)
    rl_install_pc(${L_PC})
  endif()
endfunction()

# rl_install_pc(<stem>): installs <stem>.pc made from cmake/<stem>.pc.in. Its prefix is written
# at install time, so it is the prefix installed to (`cmake --install --prefix` included), not
# the one configured; `pkg-config --define-prefix` still relocates a tree moved afterwards.
# The templates use @RL_PC_PREFIX@, @RL_PC_LIBDIR@, @RL_PC_INCLUDEDIR@, @PROJECT_VERSION@ and
# the minimum versions @RL_MIN_<dependency>@ (cmake/RinglaneDependencies.cmake).
function(rl_install_pc stem)
  set(RL_PC_PREFIX "@CMAKE_INSTALL_PREFIX@") # replaced at install time
  foreach(dir LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
      set(RL_PC_${dir} "${CMAKE_INSTALL_${dir}}")
    else()
      set(RL_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
    endif()
  endforeach()
  foreach(dep xxhash libmd zlib libuv rdkafka)
    _ringlane_dependency_info(${dep} module RL_MIN_${dep} why debian)
  endforeach()
  set(template ${PROJECT_BINARY_DIR}/pkgconfig/${stem}.pc.in)
  set(pc ${PROJECT_BINARY_DIR}/pkgconfig/${stem}.pc)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${stem}.pc.in ${template} @ONLY)
  install(CODE "file(READ \"${template}\" pc)
    string(CONFIGURE \"\${pc}\" pc @ONLY)
    file(WRITE \"${pc}\" \"\${pc}\")")
  install(FILES ${pc} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
