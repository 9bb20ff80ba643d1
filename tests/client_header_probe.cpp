// What a user's file that includes only <uma/actors/client.hpp> costs the compiler: the test
// uma_client_header_weight (tests/header_weight.cmake) preprocesses this file with its own compile
// command. Nothing else belongs here.
#include <uma/actors/client.hpp>
