// "host:port" as users write it (net/endpoint.h): IPv4, bracketed IPv6 (scoped
// too), names, and clear refusals.
#include <catch2/catch.hpp>

#include "net/endpoint.h"

using namespace ferry::net;

TEST_CASE("endpoint: IPv4, bracketed IPv6 (scoped too) and names parse, and print back as given", "[net][address]") {
  struct Case {
    const char* text;
    const char* host;
    uint16_t port;
  };
  for (const Case& c : {Case{"127.0.0.1:48148", "127.0.0.1", 48148}, Case{"[::1]:5000", "::1", 5000},
                        Case{"[::]:48148", "::", 48148}, Case{"[fe80::1%eth0]:7", "fe80::1%eth0", 7},
                        Case{"[::ffff:10.0.0.1]:80", "::ffff:10.0.0.1", 80},
                        Case{"master.example.org:1", "master.example.org", 1}}) {
    INFO(c.text);
    std::string error;
    auto e = parse_endpoint(c.text, false, &error);
    REQUIRE(e);
    CHECK(e->host == c.host);
    CHECK(e->port == c.port);
    CHECK(e->to_string() == c.text);
  }
  CHECK(parse_endpoint("[::]:0", true, nullptr)->port == 0);
}

TEST_CASE("endpoint: malformed addresses are refused saying what is wrong", "[net][address]") {
  struct Case {
    const char* text;
    bool port_zero;
    const char* says;
  };
  for (const Case& c : {Case{"::1:5000", false, "in brackets"}, Case{"fe80::1%eth0:5000", false, "in brackets"},
                        Case{"[::1]5000", false, "expected ':PORT' after ']'"}, Case{"[::1:5000", false, "missing ']'"},
                        Case{"[]:5000", false, "empty host"}, Case{"10.0.0.1", false, "expected HOST:PORT"},
                        Case{"10.0.0.1:", false, "not a number"}, Case{"10.0.0.1:65536", false, "above 65535"},
                        Case{"10.0.0.1:0", false, "port 0"}, Case{"[::1]:x", true, "not a number"},
                        Case{"http://10.0.0.1:48148", false, "not a URL: drop 'http://'"},
                        Case{"tcp://[::1]:48148/", false, "not a URL: drop 'tcp://'"}}) {
    INFO(c.text);
    std::string error;
    CHECK_FALSE(parse_endpoint(c.text, c.port_zero, &error));
    CHECK_THAT(error, Catch::Contains(c.says));
  }
}

TEST_CASE("endpoint: a listen address may be a bare port, which means loopback only", "[net][address]") {
  for (const char* bare : {"9100", ":9100"}) {
    INFO(bare);
    auto e = parse_listen_endpoint(bare, nullptr);
    REQUIRE(e);
    CHECK(e->host == "127.0.0.1");
    CHECK(e->port == 9100);
  }
  CHECK(parse_listen_endpoint("0", nullptr)->port == 0);
  CHECK(parse_listen_endpoint("[::]:9100", nullptr)->host == "::");
  CHECK(parse_listen_endpoint("0.0.0.0:0", nullptr)->host == "0.0.0.0");
  for (const char* bad : {"", ":", "70000", ":99999999999", "9100:", "host", "::1:9100"}) {
    INFO(bad);
    std::string error;
    CHECK_FALSE(parse_listen_endpoint(bad, &error));
    CHECK_THAT(error, Catch::Contains(bad));
  }
}
