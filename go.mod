module github.com/deployplane/deployplane

go 1.26
