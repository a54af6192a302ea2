#!/bin/sh
# Cleans one day of orders. ax runs it from this directory (the task's
# working_dir) with its env: ORDERS_DAY, SOURCE, WAREHOUSE_DSN and
# WAREHOUSE_PASSWORD (a secret, read from --secrets-dir; ax masks it as ***
# in what this prints), and AX_OUTPUT, the file where it leaves its
# outputs for its downstream.
set -eu
: "${WAREHOUSE_PASSWORD:?the secret warehouse_password was not given}"
echo "cleaning orders of $ORDERS_DAY from $SOURCE into $WAREHOUSE_DSN (run from $(pwd))"
echo "connected as etl with password $WAREHOUSE_PASSWORD"
# What the downstream (report) reads as {{ .Upstream.clean_orders.rows }}
# and {{ .Upstream.clean_orders.day_file }}: key=value lines in $AX_OUTPUT.
rows=1200
{
	echo "rows=$rows"
	echo "day_file=warehouse/orders/dt=$ORDERS_DAY/part-0.parquet"
} >> "${AX_OUTPUT:-/dev/null}"   # /dev/null when run by hand, outside ax
