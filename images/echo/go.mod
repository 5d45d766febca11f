module capd-py.local/echo

go 1.22
