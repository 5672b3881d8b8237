/* A test module for OpenIPMI's BMC simulator (ipmi_sim `loadlib`): answers DCMI Get Power
 * Reading (NetFn 0x2C, command 0x02, group extension 0xDC) from a file the test writes, so a
 * test can script what a BMC's power meter reports. The file holds one line:
 *   current_w min_w max_w average_w period_ms active(0|1)
 * It is read on every request; a missing or short file answers "not present" (0xCB). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <OpenIPMI/serv.h>
#include <OpenIPMI/mcserv.h>

static char power_file[4096];

static void put16(unsigned char *p, unsigned v) { p[0] = v & 0xff; p[1] = (v >> 8) & 0xff; }
static void put32(unsigned char *p, uint32_t v) {
    p[0] = v & 0xff; p[1] = (v >> 8) & 0xff; p[2] = (v >> 16) & 0xff; p[3] = (v >> 24) & 0xff;
}

static void dcmi(lmc_data_t *mc, msg_t *msg, unsigned char *rdata, unsigned int *rdata_len,
                 void *cb_data) {
    unsigned cur, lo, hi, avg, period_ms, active;
    FILE *f;
    int n;
    (void) cb_data;
    if (msg->cmd != 0x02) {
        handle_invalid_cmd(mc, rdata, rdata_len);
        return;
    }
    f = fopen(power_file, "r");
    n = f ? fscanf(f, "%u %u %u %u %u %u", &cur, &lo, &hi, &avg, &period_ms, &active) : 0;
    if (f) fclose(f);
    if (n != 6) {
        rdata[0] = 0xCB;
        *rdata_len = 1;
        return;
    }
    rdata[0] = 0;
    rdata[1] = 0xDC;
    put16(rdata + 2, cur);
    put16(rdata + 4, lo);
    put16(rdata + 6, hi);
    put16(rdata + 8, avg);
    put32(rdata + 10, (uint32_t) time(NULL));
    put32(rdata + 14, period_ms);
    rdata[18] = active ? 0x40 : 0x00;
    *rdata_len = 19;
}

int ipmi_sim_module_init(sys_data_t *sys, const char *initstr) {
    (void) sys;
    snprintf(power_file, sizeof power_file, "%s", initstr ? initstr : "");
    ipmi_emu_register_group_extension_handler(0xDC, dcmi, NULL);
    return 0;
}
