module github.com/nodepulse/nodepulse/tests

go 1.26.0
