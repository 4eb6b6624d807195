/* Prints the library's ferry_version() and checks it against the header it was
   compiled with and, when given, against argv[1] (the project's version).
   usage: ferry_version_probe [EXPECTED_VERSION]; exit 0 when all agree. */
#include <ferry/ferry.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  const char* version = ferry_version();
  printf("%s\n", version);
  if (ferry_version_number() != FERRY_VERSION_NUMBER) {
    fprintf(stderr, "the library is version %u, its header %u\n", (unsigned)ferry_version_number(),
            (unsigned)FERRY_VERSION_NUMBER);
    return 1;
  }
  if (argc > 1 && strcmp(version, argv[1]) != 0) {
    fprintf(stderr, "ferry_version() is %s, project(VERSION) %s\n", version, argv[1]);
    return 1;
  }
  return 0;
}
