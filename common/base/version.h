/* version: the one version string of every program and library in the tree
 * (the daemons' and the CLI's --version, the library's pkg-config file, the
 * Python binding's sluice.version, which tests compare with this). */
#ifndef SL_VERSION_H
#define SL_VERSION_H

#define SL_VERSION "0.1.0"

#endif
