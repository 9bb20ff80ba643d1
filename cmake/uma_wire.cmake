# The remote interface's wire (actors/remote/wire/remote.proto, docs/distributed.md): gRPC and
# protobuf from the system (Debian: libgrpc++-dev, protobuf-compiler-grpc), code generated at build
# time by protoc and grpc_cpp_plugin. Nothing is downloaded or vendored.
find_package(Protobuf 3.12 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(UMA_GRPCPP REQUIRED IMPORTED_TARGET GLOBAL grpc++)
find_program(UMA_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

set(UMA_WIRE_GEN "${PROJECT_BINARY_DIR}/wire_gen")
file(MAKE_DIRECTORY "${UMA_WIRE_GEN}")
set(UMA_WIRE_OUT)
# remote.proto: the remote interface; arbiter.proto: the node's arbiter (one file per service, so
# that a change to one regenerates and rebuilds only what includes it).
foreach(proto remote arbiter)
  set(out "${UMA_WIRE_GEN}/${proto}.pb.cc" "${UMA_WIRE_GEN}/${proto}.pb.h"
          "${UMA_WIRE_GEN}/${proto}.grpc.pb.cc" "${UMA_WIRE_GEN}/${proto}.grpc.pb.h")
  add_custom_command(
    OUTPUT ${out}
    COMMAND protobuf::protoc --proto_path=${PROJECT_SOURCE_DIR}/actors/remote/wire
            --cpp_out=${UMA_WIRE_GEN} --grpc_out=${UMA_WIRE_GEN}
            --plugin=protoc-gen-grpc=${UMA_GRPC_CPP_PLUGIN}
            ${PROJECT_SOURCE_DIR}/actors/remote/wire/${proto}.proto
    DEPENDS ${PROJECT_SOURCE_DIR}/actors/remote/wire/${proto}.proto
    COMMENT "uma: generating the wire's protobuf and gRPC code (actors/remote/wire/${proto}.proto)"
    VERBATIM)
  list(APPEND UMA_WIRE_OUT ${out})
endforeach()

# The generated code: a library of its own, built without uma's warning flags (it is protoc's
# code, not uma's). Included as <remote.pb.h> / <remote.grpc.pb.h> by actors/remote/wire/ only.
add_library(uma_wire_proto STATIC ${UMA_WIRE_OUT})
add_library(uma::wire_proto ALIAS uma_wire_proto)
set_target_properties(uma_wire_proto PROPERTIES EXPORT_NAME wire_proto POSITION_INDEPENDENT_CODE ON)
target_include_directories(uma_wire_proto PUBLIC $<BUILD_INTERFACE:${UMA_WIRE_GEN}>)
target_link_libraries(uma_wire_proto PUBLIC protobuf::libprotobuf PkgConfig::UMA_GRPCPP)
