# The Debian package (docs/deploy.md): `cmake --build build --target deb`
# builds lote and its node runner and writes build/lote_<version>_<arch>.deb,
# installable with `sudo apt install ./build/lote_*.deb`. (`--target package`
# does the same after building every target, tests included.)
include(GNUInstallDirs)
install(TARGETS lote RUNTIME DESTINATION bin)
install(TARGETS lote-exec-shim RUNTIME DESTINATION lib/lote)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/lote-server.service
        DESTINATION lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/server.conf DESTINATION /etc/lote)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION share/doc/lote)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION share/doc/lote/docs
        FILES_MATCHING PATTERN "*.md")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME lote)
set(CPACK_PACKAGE_VERSION 0.1.0)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_CONTACT "lote maintainers <lote@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Self-hosted AWS Batch-compatible batch orchestrator for LLM training")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "podman, runc, docker-registry, awscli")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/postinst ${PROJECT_SOURCE_DIR}/packaging/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_BINARY_DIR})
include(CPack)

add_custom_target(deb
  COMMAND ${CMAKE_CPACK_COMMAND} -G DEB --config ${PROJECT_BINARY_DIR}/CPackConfig.cmake
  WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
  DEPENDS lote lote-exec-shim
  COMMENT "Packing lote_${CPACK_PACKAGE_VERSION}_*.deb"
  VERBATIM)
