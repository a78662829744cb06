//go:build azure

package main

import _ "gocloud.dev/blob/azureblob" // -blob-url azblob://
