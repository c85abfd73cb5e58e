// Human-readable ledger: measured bytes next to the analytic prediction, per name.
#ifndef CTRON_LEDGER_REPORT_H
#define CTRON_LEDGER_REPORT_H
#include <stdio.h>
#include "memory/ledger.h"
#include "memory/memory_model.h"

// Prints the table; returns the number of cells where measured != predicted.
int ledger_print_report(FILE *f, const Ledger *lg, const ActShape *sh);
// "12.3 MiB"
const char *format_bytes(double bytes, char *buf, size_t len);
#endif
