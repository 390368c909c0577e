/* version.c - the version of the librk a program runs with. */
#include "rk/version.h"

const char *rk_version(void) { return RK_VERSION_STRING; }

unsigned rk_version_number(void) { return RK_VERSION_NUMBER; }
