#ifndef CLIBYAML_SHIM_H
#define CLIBYAML_SHIM_H
/* libyaml from Debian's libyaml-dev: the configuration's YAML parser (events only; GatewayConfig composes). */
#include <yaml.h>
#endif
