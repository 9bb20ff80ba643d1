# The remote interface's wire (actors/remote/wire/remote.proto, docs/distributed.md): gRPC and
# protobuf from the system (Debian: libgrpc++-dev, protobuf-compiler-grpc), code generated at build
# time by protoc and grpc_cpp_plugin. Nothing is downloaded or vendored.
find_package(Protobuf 3.12 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(UMA_GRPCPP REQUIRED IMPORTED_TARGET GLOBAL grpc++)
find_program(UMA_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

set(UMA_WIRE_GEN "${PROJECT_BINARY_DIR}/wire_gen")
file(MAKE_DIRECTORY "${UMA_WIRE_GEN}")
set(UMA_WIRE_PROTO "${PROJECT_SOURCE_DIR}/actors/remote/wire/remote.proto")
set(UMA_WIRE_OUT "${UMA_WIRE_GEN}/remote.pb.cc" "${UMA_WIRE_GEN}/remote.pb.h"
                 "${UMA_WIRE_GEN}/remote.grpc.pb.cc" "${UMA_WIRE_GEN}/remote.grpc.pb.h")
add_custom_command(
  OUTPUT ${UMA_WIRE_OUT}
  COMMAND protobuf::protoc --proto_path=${PROJECT_SOURCE_DIR}/actors/remote/wire
          --cpp_out=${UMA_WIRE_GEN} --grpc_out=${UMA_WIRE_GEN}
          --plugin=protoc-gen-grpc=${UMA_GRPC_CPP_PLUGIN} ${UMA_WIRE_PROTO}
  DEPENDS ${UMA_WIRE_PROTO}
  COMMENT "uma: generating the wire's protobuf and gRPC code (actors/remote/wire/remote.proto)"
  VERBATIM)

# The generated code: a library of its own, built without uma's warning flags (it is protoc's
# code, not uma's). Included as <remote.pb.h> / <remote.grpc.pb.h> by actors/remote/wire/ only.
add_library(uma_wire_proto STATIC ${UMA_WIRE_OUT})
add_library(uma::wire_proto ALIAS uma_wire_proto)
set_target_properties(uma_wire_proto PROPERTIES EXPORT_NAME wire_proto POSITION_INDEPENDENT_CODE ON)
target_include_directories(uma_wire_proto PUBLIC $<BUILD_INTERFACE:${UMA_WIRE_GEN}>)
target_link_libraries(uma_wire_proto PUBLIC protobuf::libprotobuf PkgConfig::UMA_GRPCPP)
