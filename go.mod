module github.com/memcgd/memcgd

go 1.26.8
